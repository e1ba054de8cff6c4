"""One simulated cluster: its store, its controllers, its timers, faults and hook state."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

from kubesim.admission import ClusterAdmission
from kubesim.authn import Authn
from kubesim.controllers.appwrappers import AppWrapperController
from kubesim.controllers.gc import GarbageCollector
from kubesim.controllers.jobs import JobController
from kubesim.controllers.jobsets import JobSetController
from kubesim.controllers.kubelet import Kubelet
from kubesim.controllers.ownership import controller_ref, pod_names, runner_uids
from kubesim.controllers.ray import RayControllers
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.serving import ServingControllers
from kubesim.controllers.training import TrainingController
from kubesim.controllers.trainjobs import TrainJobController
from kubesim.faults import Faults
from kubesim.kueue_webhooks import KueueOptions
from kubesim.store import Store
from kubesim.timers import TimerRegistry

NOT_READY = "notReady"
NEVER_READY = "neverReady"


class Cluster:
    def __init__(self, name: str, *, rng: random.Random, ready_delay_s: float = 0.1,
                 sleep_scale: float = 1.0, history_size: int = 10_000,
                 watch_buffer: int = 10_000, kueue: KueueOptions | None = None) -> None:
        self.name = name
        self.ready_delay_s = ready_delay_s
        self.sleep_scale = sleep_scale  # simulated seconds per second of a container's `sleep N`
        self.store = Store(admission=ClusterAdmission(kueue), rng=rng, history_size=history_size,
                           watch_buffer=watch_buffer)
        self.timers = TimerRegistry()
        self.faults = Faults()
        self.disconnected = False
        # A partial partition: only clients whose User-Agent starts with this are cut off
        # (MultiKueue's "the manager loses its connection to a worker"; the worker keeps working).
        self.disconnected_agent: str | None = None
        self.authn = Authn()  # bearer tokens (off unless a test sets them) and the request log
        # Control-hook state: forced outcomes by Job/JobSet uid, readiness overrides by (namespace, name).
        self.outcomes: dict[str, bool] = {}
        self.readiness: dict[tuple[str, str], str] = {}
        self.gc = GarbageCollector(self)
        self.jobs = JobController(self)
        self.jobsets = JobSetController(self)
        self.serving = ServingControllers(self)
        self.training = TrainingController(self)
        self.ray = RayControllers(self)
        self.trainjobs = TrainJobController(self)
        self.appwrappers = AppWrapperController(self)
        self.scheduler = Scheduler(self)
        self.kubelet = Kubelet(self)

    # --- hook state as the controllers see it ---

    def outcome_for(self, pod: Mapping[str, Any]) -> bool | None:
        """A forced end for this pod (finish/fail hook on its Job or JobSet), if any."""
        if not self.outcomes:
            return None
        for uid in runner_uids(self.store, pod):
            if uid in self.outcomes:
                return self.outcomes[uid]
        return None

    def outcome_for_job(self, job: Mapping[str, Any]) -> bool | None:
        if not self.outcomes:
            return None
        uid = job["metadata"]["uid"]
        if uid in self.outcomes:
            return self.outcomes[uid]
        ref = controller_ref(job)
        if ref is not None and ref.get("kind") in ("JobSet", "RayJob") and self.store.by_uid(ref["uid"]) is not None:
            return self.outcomes.get(ref["uid"])
        return None

    def readiness_override(self, pod: Mapping[str, Any]) -> str | None:
        if not self.readiness:
            return None
        ns = pod["metadata"]["namespace"]
        for name in sorted(pod_names(self.store, pod)):
            v = self.readiness.get((ns, name))
            if v is not None:
                return v
        return None

    # --- settledness ---

    def pending_work(self) -> int:
        queues = (self.gc.queue, self.jobs.queue, self.jobsets.queue, self.scheduler.queue, self.kubelet.queue,
                  *self.serving.queues, self.training.queue, *self.ray.queues,
                  self.trainjobs.queue, self.appwrappers.queue)
        return self.timers.pending() + sum(q.pending() for q in queues)

    def state(self) -> dict[str, Any]:
        return {
            "resourceVersion": str(self.store.rv),
            "msSinceLastChange": int((time.monotonic() - self.store.last_change) * 1000),
            "pendingTimers": self.pending_work(),
            "disconnected": self.disconnected,
            "disconnectedAgent": self.disconnected_agent,
            "openWatches": len(list(self.store.hub.watchers())),
            "faults": self.faults.describe(),
        }

    def cut_off(self, user_agent: str) -> bool:
        if self.disconnected:
            return True
        return self.disconnected_agent is not None and user_agent.startswith(self.disconnected_agent)

    def close(self) -> None:
        self.timers.close()
        for q in (self.gc.queue, self.jobs.queue, self.jobsets.queue, self.scheduler.queue, self.kubelet.queue,
                  *self.serving.queues, self.training.queue, *self.ray.queues,
                  self.trainjobs.queue, self.appwrappers.queue):
            q.close()
        self.store.hub.cut_all("disconnect")
