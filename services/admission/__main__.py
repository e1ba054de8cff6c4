"""python -m services.admission: the Kueue scheduler (one active instance per lease, the rest standby)."""

from kq.gc_tuning import pause_for_imports, tune_gc_for_caches

if __name__ == "__main__":
    pause_for_imports()  # the collector would walk every object the imports make (kq.gc_tuning)
    from kq.runtime import run_service
    from services.admission.collector import GC_THRESHOLDS
    from services.admission.service import SERVICE, main

    tune_gc_for_caches(GC_THRESHOLDS)  # every pending workload is held: see collector.py
    # Health says "standby" / "starting" / "ready" itself (ready once fenced and deciding).
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
