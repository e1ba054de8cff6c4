"""python -m services.podsready: the all-or-nothing timer service (waitForPodsReady)."""

from kq.gc_tuning import pause_for_imports, tune_gc_for_caches

if __name__ == "__main__":
    pause_for_imports()  # the collector would walk every object the imports make (kq.gc_tuning)
    from kq.runtime import run_service
    from services.podsready.service import main

    tune_gc_for_caches()  # its mirror of decoded objects would keep the collector walking them
    raise SystemExit(run_service("podsready", main, ready_when_started=False))
