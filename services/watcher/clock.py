"""The shell's clock: cores get `now` as an RFC 3339 string (metav1.Time, whole seconds)."""

from __future__ import annotations

from datetime import datetime, timezone

from kq.api.meta import format_time


def now_rfc3339() -> str:
    return format_time(datetime.now(timezone.utc))
