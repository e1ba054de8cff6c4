"""Go-style durations as the scenarios write them: "500ms", "2s", "1m", "1m30s", "1.5h"."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds; ValueError naming the text when it is not a duration."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"bad duration {text!r}: want e.g. 500ms, 2s, 1m")
    total, pos = 0.0, 0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"bad duration {text!r}: want e.g. 500ms, 2s, 1m")
    return total
