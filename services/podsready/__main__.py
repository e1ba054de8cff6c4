"""python -m services.podsready: the all-or-nothing timer service (waitForPodsReady)."""

from kq.runtime import run_service
from services.podsready.service import main

if __name__ == "__main__":
    raise SystemExit(run_service("podsready", main, ready_when_started=False))
