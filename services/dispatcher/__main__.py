"""python -m services.dispatcher: MultiKueue (one active instance per manager, the rest standby)."""

from kq.runtime import run_service
from services.dispatcher.service import SERVICE, main

if __name__ == "__main__":
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
