"""One leadership term of the dispatcher (epoch E) for one manager cluster.

1. replay the manager's mirror (Workloads, Jobs, AdmissionChecks, MultiKueueConfigs and
   MultiKueueClusters) and keep following it; fence older terms' commands;
2. keep a RemoteCluster (services/dispatcher/remotes.py) per MultiKueueCluster;
3. reconcile each manager workload that carries a MultiKueue check whenever it, its Job, its
   copies or a cluster's connection changed, or a timer it asked for fired: core.flow decides,
   this module deletes and creates on the workers (deletes first) and sends the manager-side
   changes to the watcher as commands (ids derived from the decision, so repeats are dropped);
4. keep the Active conditions of MultiKueueClusters and MultiKueue AdmissionChecks.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

import msgspec

from kq import subjects
from kq.api import constants as k
from kq.api.core import JobSetStatus, JobStatus
from kq.api.kueue import AdmissionCheck, MultiKueueCluster, MultiKueueConfig, Workload
from kq.kube import AlreadyExists, KubeClient, NotFound
from kq.messages import (
    Command,
    Fence,
    FinishWorkload,
    SetActiveCondition,
    SetAdmissionCheckState,
    SetNominatedClusters,
    SyncJobSetStatus,
    SyncJobStatus,
    SyncObjectStatus,
    command_msg_id,
    command_subject_of,
)
from kq.mirror import MirrorView, ObjectRecord
from kq.obs import get_logger
from kq.remote_clusters import KubeconfigSource
from kq.runtime import Bus, Delivery, OutMsg, Replay
from services.dispatcher.core import clusters as cl
from services.dispatcher.core.copies import remote_copy, remote_workload
from services.dispatcher.core.flow import reconcile
from services.dispatcher.core.kinds import ADAPTERS, RemoteJob
from services.dispatcher.core.model import (
    LEASE_ANNOTATION,
    ClusterView,
    Finish,
    Inputs,
    ManagerIntent,
    Nominate,
    Plan,
    SetCheck,
    Settings,
    SyncJob,
)
from services.dispatcher.external import ExternalDoor
from services.dispatcher.guard import run_guard
from services.dispatcher.intake import may_concern, multikueue_checks
from services.dispatcher.remotes import RemoteCluster
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.wakeups import Wakeups

WRITER = "dispatcher"
CONFIG_KINDS = ("admissioncheck", "multikueueconfig", "multikueuecluster")
NsName = tuple[str, str]
_json = msgspec.json.Encoder(order="sorted")
# A manager-side intent already sent is not sent again while the manager's object still looks as it
# did then (the watcher has not applied it yet, or it changed nothing), until this long has passed:
# every copy's change on every worker re-decides the manager workload, and each repeat cost the
# watcher a read and an outcome. A refused or lost command is sent again after this. (3 s was
# shorter than the watcher's command backlog whenever the MultiKueue stack was CPU-bound: each Check
# state and Finish went ~3 times, 2.5 times what it does, and the repeats deepened the backlog.)
RESEND_AFTER_S = 10.0
# ... and "looks as it did" includes these conditions with their transition times, so a workload
# evicted and holding quota again is a new state: its nomination and check go out at once.
_MEMO_CONDITIONS = (k.WORKLOAD_QUOTA_RESERVED, k.WORKLOAD_EVICTED, k.WORKLOAD_ADMITTED, k.WORKLOAD_FINISHED)
# A Finish is about the reservation alone: the check going Ready or the manager's Admitted landing
# after it was sent is no reason to send it again (it did, 1.6 Finish commands a job).
_RESERVATION_CONDITIONS = (k.WORKLOAD_QUOTA_RESERVED, k.WORKLOAD_EVICTED)


async def _all(calls: Any) -> None:
    """Run the calls concurrently; the first failure is raised once all have ended."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r


class _Name(msgspec.Struct, frozen=True):
    name: str = ""


class _Named(msgspec.Struct, frozen=True):
    metadata: _Name = _Name()


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _CommandFields(TypedDict):
    """The fields every command of this writer shares (kq.messages._Command), but its id."""

    cluster: str
    writer: str
    epoch: int


class _TargetFields(TypedDict):
    """The object a workload or Job command names (kq.messages._WorkloadCommand)."""

    namespace: str
    name: str
    uid: str


def _digest(*parts: Any) -> str:
    return hashlib.sha256(_json.encode(parts)).hexdigest()[:20]


class Term:
    def __init__(self, bus: Bus, manager: str, manager_client: KubeClient | None, core: Settings,
                 settings: DispatcherSettings, epoch: int, workers: tuple[str, ...] = ()) -> None:
        self.bus = bus
        self.manager = manager
        self.workers = workers  # worker clusters this kq serves too: their copies get the lease guard
        self.core = core
        self.settings = settings
        self.epoch = epoch
        self.view = MirrorView(on_invalid=lambda key, why: self.log.warning(
            "object skipped: it does not decode", object=f"{key.kind}/{key.namespace}/{key.name}", error=why))
        self.loader = KubeconfigSource(manager_client, settings.kq_namespace)
        self.remotes: dict[str, RemoteCluster] = {}
        self._remote_tasks: dict[str, asyncio.Task[None]] = {}
        self._sources: dict[str, Any] = {}
        self.dirty: set[NsName] = set()
        self._wake = asyncio.Event()
        self._topology_dirty = True
        self._busy: set[NsName] = set()
        self.wakeups: Wakeups[NsName] = Wakeups(self.mark)  # Plan.wake_in: one timer per workload
        self.rounds: dict[str, tuple[float, tuple[str, ...]]] = {}  # uid -> Incremental round (start, nominated)
        self.finish_held: dict[str, float] = {}  # uid -> when its Finish was first held back (Plan.hold_finish)
        self.finish_synced: dict[str, float] = {}  # uid -> when its manager object first showed the copy's status
        self.job_owner: dict[tuple[str, str, str], NsName] = {}  # manager (kind, ns, name) of a Job/JobSet -> workload
        self.deleted: dict[NsName, str] = {}  # manager workloads seen deleted -> uid, until their copies are gone
        self.sent: dict[str, float] = {}  # memo of intents sent (see RESEND_AFTER_S) -> when
        self._mk_checks: frozenset[str] = frozenset()  # names of the MultiKueue AdmissionChecks (intake.py)
        self._checks: dict[str, AdmissionCheck] | None = None  # the AdmissionChecks by name, until one changes
        self._workloads: Replay | None = None  # the Workload/Job replay, once a MultiKueue check exists
        self._tasks: asyncio.TaskGroup | None = None
        self.external = ExternalDoor(bus, self) if core.mode == "External" else None
        self.log = get_logger("kq.dispatcher", cluster=manager, epoch=epoch)

    # --- inputs ---

    def mark(self, key: NsName) -> None:
        self.dirty.add(key)
        self._wake.set()

    def mark_all(self) -> None:
        """Every workload that may carry a MultiKueue check (intake.py: the others reconcile to nothing)."""
        for rec in self.view.items(self.manager, "workload"):
            if may_concern(rec, self._mk_checks):
                self.dirty.add((rec.namespace, rec.name))
        self._wake.set()

    def _on_record(self, what: Any) -> None:
        if not isinstance(what, ObjectRecord) or what.cluster != self.manager:
            return
        if what.kind == "workload":
            if what.deleted:  # its copies go at once (gc would find them later)
                self.deleted[(what.namespace, what.name)] = what.uid
            if may_concern(what, self._mk_checks):
                self.mark((what.namespace, what.name))
        elif what.kind in self.core.kinds:
            owner = self.job_owner.get((what.kind, what.namespace, what.name))
            if owner is not None:
                self.mark(owner)
        elif what.kind in ("admissioncheck", "multikueueconfig", "multikueuecluster"):
            if what.kind == "admissioncheck":
                self._checks = None
                self._mk_checks = multikueue_checks(self.view.typed_items(self.manager, "admissioncheck"))
                if self._mk_checks and self._workloads is None and self._tasks is not None:
                    self._tasks.create_task(self._follow_workloads(), name="dispatcher:follow-workloads")
            self._topology_dirty = True
            self._wake.set()

    def _on_remote_change(self, cluster: str, keys: set[NsName]) -> None:
        for key in keys:
            self.mark(key)

    def _on_remote_progress(self, cluster: str, keys: set[NsName]) -> None:
        # Kueue reconciles a remote change one eventsBatchPeriod (1 s) after it; kq at once, but for a
        # worker Job's status moving along (remotes.progress_only): ~3.8 such changes a job, each a
        # reconcile, and a status copy onto the manager's Job whenever it ran, soon superseded.
        for key in keys:
            self.wakeups.wake_in(key, self.settings.progress_batch_s)

    def _on_remote_state(self, cluster: str) -> None:
        self._topology_dirty = True
        self._wake.set()

    # --- run ---

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tasks = tg
            config = self._replay(CONFIG_KINDS)
            tg.create_task(config.run(), name="dispatcher:mirror:config")
            await config.wait_caught_up(timeout=self.settings.replay_timeout_s)
            if self._mk_checks:
                await self._follow_workloads()
            fence = Fence(id=f"dispatcher-fence:{self.manager}:{self.epoch}", cluster=self.manager, writer=WRITER,
                          epoch=self.epoch)
            await self.bus.publish(command_subject_of(fence), fence, msg_id=command_msg_id(fence))
            if self.external is not None:
                tg.create_task(self.external.run(), name="dispatcher:external")
            if self.workers:
                tg.create_task(run_guard(self.bus, self.workers, self.core, self.epoch), name="dispatcher:guard")
            self.bus.mark_ready()
            self.log.info("dispatching", mode=self.core.mode, workloads=len(self.view.items(self.manager, "workload")))
            self.mark_all()
            await self._loop()

    def _replay(self, kinds: tuple[str, ...]) -> Replay:
        async def follow(d: Delivery) -> None:
            self._on_record(self.view.apply_delivery(d))

        return self.bus.replay(subjects.OBJECTS_STREAM, [subjects.object_filter(self.manager, k) for k in kinds],
                               follow, deliver="last_per_subject")

    async def _follow_workloads(self) -> None:
        """The manager's Workloads and Jobs, from the first MultiKueue AdmissionCheck on (intake.py:
        before there is one no Workload can concern us, so none is even delivered) and for good;
        a replay of the last values catches up with every one there is, then each is reconciled."""
        if self._workloads is None:
            assert self._tasks is not None
            self._workloads = self._replay(("workload", *self.core.kinds))
            self._tasks.create_task(self._workloads.run(), name="dispatcher:mirror:workloads")
        await self._workloads.wait_caught_up(timeout=self.settings.replay_timeout_s)
        self.mark_all()

    async def _loop(self) -> None:
        sem = asyncio.Semaphore(self.settings.concurrency)
        pending: set[asyncio.Task[None]] = set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._topology_dirty:
                self._topology_dirty = False
                await self._topology()
                self.mark_all()
            keys = [key for key in self.dirty if key not in self._busy]
            self.dirty.difference_update(keys)
            for key in keys:
                self._busy.add(key)
                await sem.acquire()
                t = asyncio.create_task(self._one(key, sem))
                pending.add(t)
                t.add_done_callback(pending.discard)

    async def _one(self, key: NsName, sem: asyncio.Semaphore) -> None:
        try:
            await self.reconcile_key(key)
        except Exception as e:  # noqa: BLE001 - one workload's failure is retried, never the term's end
            self.log.warning("reconcile failed; retrying", workload=f"{key[0]}/{key[1]}",
                             error=f"{type(e).__name__}: {e}")
            asyncio.get_running_loop().call_later(self.settings.retry_s, self.mark, key)
        finally:
            self._busy.discard(key)
            sem.release()
            if key in self.dirty:
                self._wake.set()

    # --- clusters and checks ---

    def _typed(self, kind: str) -> dict[str, Any]:
        return {o.metadata.name: o for o in self.view.typed_items(self.manager, kind)}

    async def _topology(self) -> None:
        mkcs: dict[str, MultiKueueCluster] = self._typed("multikueuecluster")
        for name, mkc in mkcs.items():
            src = mkc.spec.cluster_source.kube_config
            if name in self.remotes and self._sources.get(name) == src:
                continue
            await self._stop_remote(name)
            rc = RemoteCluster(name, src, self.loader, self.core.origin, self._on_remote_change, self._on_remote_state,
                               retry_base_s=self.settings.retry_base_s, retry_max_s=self.settings.retry_max_s,
                               watch_timeout_s=self.settings.watch_timeout_s, kinds=self.core.kinds,
                               call_timeout_s=self.settings.remote_call_timeout_s, resync_s=self.settings.resync_s,
                               on_progress=self._on_remote_progress)
            self.remotes[name], self._sources[name] = rc, src
            self._remote_tasks[name] = asyncio.create_task(rc.run(), name=f"remote:{name}")
        for name in [n for n in self.remotes if n not in mkcs]:
            await self._stop_remote(name)
        cmds: list[Command] = []
        for name, mkc in mkcs.items():
            if self.remotes[name].state == cl.CONNECTING and not mkc.status.conditions:
                continue  # no word yet: the first attempt's outcome is written, not "Connecting"
            want = cl.cluster_condition(mkc, self.remotes[name].state)
            if cl.condition_differs(mkc.status.conditions, want):
                cmds.append(self._active_cmd("multikueuecluster", mkc, want))
        # What the AdmissionChecks see: the clusters' conditions as we are about to write them.
        effective = {n: msgspec.structs.replace(m, status=msgspec.structs.replace(
            m.status, conditions=(cl.cluster_condition(m, self.remotes[n].state),))) for n, m in mkcs.items()}
        configs: dict[str, MultiKueueConfig] = self._typed("multikueueconfig")
        for ac in self._typed("admissioncheck").values():
            if ac.spec.controller_name != k.MULTIKUEUE_CONTROLLER_NAME:
                continue
            want = cl.admission_check_condition(ac, configs, effective)
            if cl.condition_differs(ac.status.conditions, want):
                cmds.append(self._active_cmd("admissioncheck", ac, want))
        await self._send(cmds)

    async def _stop_remote(self, name: str) -> None:
        task = self._remote_tasks.pop(name, None)
        self.remotes.pop(name, None)
        self._sources.pop(name, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _active_cmd(self, kind: Literal["admissioncheck", "multikueuecluster"], obj: Any, cond: Any) -> Command:
        cid = f"mk-active:{kind}:{obj.metadata.name}:{obj.metadata.resource_version}:{_digest(cond)}"
        return SetActiveCondition(id=cid, cluster=self.manager, writer=WRITER, epoch=self.epoch, kind=kind,
                                  name=obj.metadata.name, condition=cond)

    # --- one workload ---

    def mk_check(self, wl: Workload) -> tuple[str, tuple[str, ...]] | None:
        """The MultiKueue check on a workload and its config's clusters."""
        if self._checks is None:  # asked for every reconcile: decoded and sorted once per change
            self._checks = self._typed("admissioncheck")
        acs = self._checks
        for st in wl.status.admission_checks:
            ac = acs.get(st.name)
            if ac is None or ac.spec.controller_name != k.MULTIKUEUE_CONTROLLER_NAME or ac.spec.parameters is None:
                continue
            cfg = self.view.typed(subjects.ObjectKey(self.manager, "multikueueconfig", "", ac.spec.parameters.name))
            return st.name, tuple(cfg.spec.clusters) if cfg is not None else ()
        return None

    def _local_job(self, wl: Workload) -> tuple[RemoteJob | None, ObjectRecord | None]:
        """The manager's object controlling the workload (a kind MultiKueue has an enabled adapter for)."""
        ref = wl.metadata.controller_ref()
        kind = ADAPTERS.get((ref.api_version, ref.kind)) if ref is not None else None
        if ref is None or kind is None or kind not in self.core.kinds:
            return None, None
        key = subjects.ObjectKey(self.manager, kind, wl.metadata.namespace, ref.name)
        self.job_owner[(kind, wl.metadata.namespace, ref.name)] = (wl.metadata.namespace, wl.metadata.name)
        rec = self.view.get(key)
        if rec is None or rec.uid != ref.uid:
            return None, None
        return self.view.typed(key), rec

    async def reconcile_key(self, key: NsName) -> None:
        ns, name = key
        rec = self.view.get(subjects.ObjectKey(self.manager, "workload", ns, name))
        if rec is None:
            self.wakeups.cancel(key)
            uid = self.deleted.pop(key, None)
            if uid is not None:
                if self.external is not None:
                    await self.external.deleted(ns, name, uid)
                self.finish_held.pop(uid, None)
                self.finish_synced.pop(uid, None)
                await self._delete_copies_of(key, uid)
            return
        wl = self.view.typed(rec.key)
        if not isinstance(wl, Workload):
            return
        found = self.mk_check(wl)
        if found is None:
            return
        check, names = found
        local_job, job_rec = self._local_job(wl)
        views, remotes, jobs = [], {}, {}
        for c in names:
            rc = self.remotes.get(c)
            if rc is None:
                continue
            views.append(ClusterView(name=c, available=rc.available, lost_since=rc.lost_since,
                                     kinds=rc.kinds if rc.available else None))
            if rc.available:
                if (copy := rc.workloads.get(key)) is not None:
                    remotes[c] = copy
                if (found_job := rc.job_for(ns, name)) is not None and (
                        job_rec is None or found_job[0] == job_rec.kind):
                    jobs[c] = found_job[1]
        ref = wl.metadata.controller_ref()
        rnd = self.rounds.get(wl.metadata.uid)
        inp = Inputs(local=wl, check=check, clusters=tuple(views), remotes=remotes, remote_jobs=jobs,
                     local_job=local_job, owner=(ref.api_version, ref.kind) if ref is not None else None,
                     round_started=rnd[0] if rnd else None, round_nominated=rnd[1] if rnd else (),
                     finish_held_since=self.finish_held.get(wl.metadata.uid),
                     finish_synced_since=self.finish_synced.get(wl.metadata.uid), now=time.time())
        plan = reconcile(inp, self.core)
        await self._apply(wl, rec, check, plan, job_rec)

    async def _apply(self, wl: Workload, rec: ObjectRecord, check: str, plan: Plan,
                     job_rec: ObjectRecord | None) -> None:
        ns, name = wl.metadata.namespace, wl.metadata.name
        # Deletes (all clusters at once) before creates, and both before the Job.
        await _all(self._delete_remote(c, ns, name) for c in plan.delete)
        if plan.create:
            lease = _stamp(time.time() + self.core.lease_s) if self.core.lease_enabled else None
            body = msgspec.json.encode(remote_workload(msgspec.json.decode(rec.raw), self.core.origin, lease))
            await _all(self._create(c, "workload", ns, body) for c in plan.create)
        if plan.renew_lease is not None:
            await self._renew(plan.renew_lease[0], ns, name, plan.renew_lease[1])
        if plan.create_job is not None and job_rec is not None:
            job_body = remote_copy(job_rec.kind, msgspec.json.decode(job_rec.raw), name, self.core.origin)
            await self._create(plan.create_job, job_rec.kind, ns, msgspec.json.encode(job_body))
        if plan.reset_round:
            self.rounds.pop(wl.metadata.uid, None)
            self.finish_held.pop(wl.metadata.uid, None)
            self.finish_synced.pop(wl.metadata.uid, None)
            self.wakeups.cancel((ns, name))
        if plan.hold_finish:
            self.finish_held.setdefault(wl.metadata.uid, time.time())
        if plan.finish_synced:
            self.finish_synced.setdefault(wl.metadata.uid, time.time())
        if plan.round_started is not None:
            self.rounds[wl.metadata.uid] = (plan.round_started, plan.round_nominated)
        if plan.wake_in is not None:
            self.wakeups.wake_in((ns, name), plan.wake_in)
        if self.external is not None:
            await self.external.observe(wl, check, plan.awaiting_nomination,
                                        [c for c in self.remotes if self.remotes[c].available])
        intents, held_for = self._not_sent_yet(wl, check, plan.manager, job_rec)
        if held_for is not None:
            # Decided again once the repeat may go: nothing else may come to bring this workload back
            # (a command refused or lost, or undone by a later write, on an otherwise idle stack).
            self.wakeups.wake_in((ns, name), held_for)
        cmds = [self._command(wl, rec, check, intent, job_rec) for intent in intents]
        await self._send([c for c in cmds if c is not None])
        if plan.delete or plan.create or plan.create_job or intents:
            self.log.info("dispatch", workload=f"{ns}/{name}", why=plan.why, delete=plan.delete, create=plan.create,
                          job=plan.create_job, manager=[type(i).__name__ for i in intents])

    def _not_sent_yet(self, wl: Workload, check: str, intents: tuple[ManagerIntent, ...],
                      job_rec: ObjectRecord | None) -> tuple[list[ManagerIntent], float | None]:
        """The intents not already sent against the manager objects as they look now (RESEND_AFTER_S),
        and, when some were held back as repeats, in how long the first of them may go again."""
        if not intents:
            return [], None
        now = time.monotonic()
        if len(self.sent) > 4096:
            self.sent = {key: at for key, at in self.sent.items() if now - at < RESEND_AFTER_S}
        st = wl.status
        conds = [c for c in st.conditions if c.type in _MEMO_CONDITIONS]
        out = []
        held_for: float | None = None
        for intent in intents:
            # What the intent is about, as the manager shows it now: for a status sync the manager
            # Job's status (its integration unsuspending it is no reason to send the same status
            # again); else the part of the workload's state the intent sets or depends on (the
            # nomination landing does not make a sent check state new, nor does the check going
            # Ready make a sent Finish new).
            match intent:
                case SyncJob():
                    local_job = self.view.typed(job_rec.key) if job_rec is not None else None
                    seen = _digest(local_job.status) if local_job is not None else ""
                case Finish():
                    seen = _digest([c for c in conds if c.type in _RESERVATION_CONDITIONS])
                case SetCheck():
                    seen = _digest([c for c in st.admission_checks if c.name == check], st.cluster_name, conds)
                case _:
                    seen = _digest(st.cluster_name, st.nominated_cluster_names, conds)
            key = f"{wl.metadata.uid}:{seen}:{_digest(intent)}"
            at = self.sent.get(key)
            if at is not None and now - at < RESEND_AFTER_S:
                left = RESEND_AFTER_S - (now - at)
                held_for = left if held_for is None else min(held_for, left)
                continue
            self.sent[key] = now
            out.append(intent)
        return out, held_for

    def _command(self, wl: Workload, rec: ObjectRecord, check: str, intent: ManagerIntent,
                 job_rec: ObjectRecord | None) -> Command | None:
        base = _CommandFields(cluster=self.manager, writer=WRITER, epoch=self.epoch)
        cid = f"mk:{rec.uid}:{rec.resource_version}:{_digest(intent)}"
        wkey = _TargetFields(namespace=wl.metadata.namespace, name=wl.metadata.name, uid=wl.metadata.uid)
        match intent:
            case SetCheck():
                return SetAdmissionCheckState(id=cid, **base, **wkey, check=check, state=intent.state,
                                              message=intent.message, cluster_name=intent.cluster_name,
                                              topology_ready=intent.topology_ready)
            case Nominate():
                return SetNominatedClusters(id=cid, **base, **wkey, clusters=intent.clusters)
            case Finish():
                return FinishWorkload(id=cid, **base, **wkey, reason=intent.reason, message=intent.message)
            case SyncJob():
                if job_rec is None:
                    return None
                jid = f"mk-job:{job_rec.uid}:{job_rec.resource_version}:{_digest(intent)}"
                target = _TargetFields(namespace=job_rec.namespace, name=job_rec.name, uid=job_rec.uid)
                if isinstance(intent.status, JobSetStatus):
                    return SyncJobSetStatus(id=jid, **base, **target, status=intent.status)
                if isinstance(intent.status, JobStatus):
                    return SyncJobStatus(id=jid, **base, **target, status=intent.status)
                return SyncObjectStatus(id=jid, **base, **target, kind=job_rec.kind,  # type: ignore[arg-type]  # a FrameworkKind: core.kinds' tokens
                                        status=msgspec.to_builtins(intent.status))
        raise TypeError(f"unknown intent {intent!r}")

    async def send_nomination(self, wl: Workload, clusters: tuple[str, ...], msg_id: str) -> None:
        cmd = SetNominatedClusters(id=msg_id, cluster=self.manager, writer=WRITER, epoch=self.epoch,
                                   namespace=wl.metadata.namespace, name=wl.metadata.name, uid=wl.metadata.uid,
                                   clusters=clusters)
        await self._send([cmd])

    async def _send(self, cmds: list[Command]) -> None:
        # publish_batch: stored before return like publish_many, without a future and a PubAck per
        # command (publish_many was two thirds of the time the dispatcher spent sending).
        await self.bus.publish_batch([OutMsg(command_subject_of(c), c, command_msg_id(c)) for c in cmds])

    async def _delete_copies_of(self, key: NsName, uid: str) -> None:
        """A deleted manager workload's copies, wherever reachable (the rest is gc's, after a reconnect)."""
        ns, name = key
        for c, rc in list(self.remotes.items()):
            copy = rc.workloads.get(key) if rc.available else None
            if copy is not None and copy.metadata.annotations.get(k.MULTIKUEUE_ORIGIN_UID_ANNOTATION, uid) == uid:
                await self._delete_remote(c, ns, name)
                self.log.info("dispatch", workload=f"{ns}/{name}", why="deleted on the manager", delete=[c])

    # --- remote writes ---

    async def _create(self, cluster: str, kind: str, ns: str, body: bytes) -> None:
        rc = self.remotes.get(cluster)
        if rc is None or rc.client is None or not rc.available:
            return
        name = msgspec.json.decode(body, type=_Named).metadata.name
        with rc.own_write(kind, ns, name):
            try:
                async with asyncio.timeout(self.settings.remote_call_timeout_s):
                    raw = await rc.client.create(kind, ns, body)
            except AlreadyExists:
                return
            rc.remember(kind, raw)

    async def _renew(self, cluster: str, ns: str, name: str, until: float) -> None:
        rc = self.remotes.get(cluster)
        if rc is None or rc.client is None or not rc.available:
            return
        try:
            lease = {"metadata": {"annotations": {LEASE_ANNOTATION: _stamp(until)}}}
            async with asyncio.timeout(self.settings.remote_call_timeout_s):
                raw = await rc.client.patch("workload", ns, name, lease, patch_type="merge")
        except NotFound:
            return
        rc.remember("workload", raw)

    async def _delete_remote(self, cluster: str, ns: str, name: str) -> None:
        rc = self.remotes.get(cluster)
        if rc is None or rc.client is None or not rc.available:
            return
        async with asyncio.timeout(self.settings.remote_call_timeout_s):  # a hang would hold the workload for good
            await rc.delete_copy(ns, name)
