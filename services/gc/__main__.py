"""python -m services.gc: MultiKueue orphans on the workers, Workload retention on the manager."""

from kq.runtime import run_service
from services.gc.service import SERVICE, main

if __name__ == "__main__":
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
