"""Peak memory and CPU time of running processes, from Linux /proc (no psutil needed).

VmHWM is the peak resident set size over the process's life, so reading it once, just
before the process stops, gives its maximum; utime + stime give the CPU it has used.
"""

from __future__ import annotations

import os
from pathlib import Path

from kq.bench.metrics import ProcessStats

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_stats(name: str, pid: int) -> ProcessStats | None:
    """None when the process is gone or /proc is not there."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    hwm_kib = 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            hwm_kib = int(line.split()[1])
            break
    # Fields after the parenthesised command name (which may contain spaces): utime is field 14.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        cpu_ticks = int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        cpu_ticks = 0
    return ProcessStats(name=name, max_rss_bytes=hwm_kib * 1024, cpu_ms=cpu_ticks * 1000 // _TICKS)
