"""The cyclic garbage collector's pace for processes that keep many decoded API objects.

The watcher's caches and kubesim's store hold hundreds of thousands of containers. With CPython's
default first-generation threshold (700 net allocations) the collector ran every few messages and
walked what had survived: 17 % of the watcher's CPU and 10 % of kubesim's in a live benchmark
(`kq bench`, 3,000 workloads). Reference counting frees nearly everything here; the collector is
only there for the rare cycle, so it may wait for far more allocations.
"""

from __future__ import annotations

import gc

CACHE_HEAVY_GC_THRESHOLDS = (20_000, 10, 10)


def pause_for_imports() -> None:
    """Call before a process's start-up imports: they allocate a great many objects and make few
    cycles, and the collector's passes over them were ~10 % of the import CPU (~135 collections,
    92-110 ms of a service's ~1 s, gc.callbacks). resume_after_imports turns it back on."""
    gc.disable()


def resume_after_imports() -> None:
    gc.enable()


def tune_gc_for_caches(thresholds: tuple[int, int, int] = CACHE_HEAVY_GC_THRESHOLDS) -> None:
    """Call once, after start-up's imports: what exists by then leaves the collector's walks for
    good (freeze), collections come less often (`thresholds`), and the collector runs again."""
    gc.freeze()
    gc.set_threshold(*thresholds)
    resume_after_imports()
