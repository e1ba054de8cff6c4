"""python -m services.podsready: the all-or-nothing timer service (waitForPodsReady)."""

from kq.gc_tuning import tune_gc_for_caches
from kq.runtime import run_service
from services.podsready.service import main

if __name__ == "__main__":
    tune_gc_for_caches()  # its mirror of decoded objects would keep the collector walking them
    raise SystemExit(run_service("podsready", main, ready_when_started=False))
