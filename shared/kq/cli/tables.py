"""Tables as kubectl prints them: upper-case headers, columns padded and three spaces apart.

Pure: no I/O and no clock (ages are computed from a `now` the caller passes).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from kq.api.meta import parse_time

GAP = "   "
NONE = "<none>"


class Table(NamedTuple):
    headers: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]


def render(table: Table) -> str:
    """The table as text, one line per row, no trailing spaces."""
    lines = [table.headers, *table.rows]
    for row in table.rows:
        if len(row) != len(table.headers):
            raise ValueError(f"row {row!r} has {len(row)} cells, the table {len(table.headers)} columns")
    widths = [max(len(line[i]) for line in lines) for i in range(len(table.headers))]
    out = []
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line)]
        out.append(GAP.join(cells).rstrip())
    return "\n".join(out) + "\n"


def with_namespace(table: Table, namespaces: Sequence[str]) -> Table:
    """kubectl -A: a NAMESPACE column first."""
    return Table(("NAMESPACE", *table.headers), [(ns, *row) for ns, row in zip(namespaces, table.rows, strict=False)])


def human_duration(seconds: float) -> str:
    """Kubernetes' HumanDuration (what kubectl's AGE shows): 45s, 5m30s, 2h, 3d4h, 2y10d."""
    if seconds < -1:
        return "<invalid>"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    years = days // 365
    if days < 365 * 8:
        rest = days % 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{years}y"


def age(timestamp: str | None, now: datetime) -> str:
    if not timestamp:
        return NONE
    try:
        when = parse_time(timestamp)
    except ValueError:
        return "<invalid>"
    return human_duration((now - when).total_seconds())


def between(start: str | None, end: str | None, now: datetime) -> str:
    """A duration from start to end (or to now when not ended), as kubectl's Job DURATION."""
    if not start:
        return ""
    try:
        t0 = parse_time(start)
        t1 = parse_time(end) if end else now
    except ValueError:
        return "<invalid>"
    return human_duration((t1 - t0).total_seconds())
