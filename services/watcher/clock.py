"""The shell's clock: cores get `now` as an RFC 3339 string (metav1.Time, whole seconds)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from kq.api.meta import format_time

_last: tuple[int, str] = (-1, "")  # (epoch second, its text): formatting once per second is enough


def now_rfc3339() -> str:
    global _last
    second = int(time.time())
    if second != _last[0]:
        _last = (second, format_time(datetime.fromtimestamp(second, UTC)))
    return _last[1]
