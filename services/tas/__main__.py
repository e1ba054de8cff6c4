"""python -m services.tas: the topology solver (one active instance per lease, the rest standby)."""

from kq.gc_tuning import pause_for_imports, tune_gc_for_caches

if __name__ == "__main__":
    pause_for_imports()  # the collector would walk every object the imports make (kq.gc_tuning)
    from kq.runtime import run_service
    from services.tas.service import SERVICE, main

    tune_gc_for_caches()  # its mirror of decoded objects would keep the collector walking them
    # Health says "standby" / "starting" / "ready" itself (ready once rebuilt and answering).
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
