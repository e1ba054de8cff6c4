"""python -m services.admission: the Kueue scheduler (one active instance per lease, the rest standby)."""

import gc

from kq.runtime import run_service
from services.admission.collector import GC_THRESHOLDS
from services.admission.service import SERVICE, main

if __name__ == "__main__":
    gc.set_threshold(*GC_THRESHOLDS)
    # Health says "standby" / "starting" / "ready" itself (ready once fenced and deciding).
    raise SystemExit(run_service(SERVICE, main, ready_when_started=False))
