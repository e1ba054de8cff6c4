"""The kubelet of every node: runs bound pods.

A bound pod goes Running at once, Ready after the cluster's readiness delay, and
Succeeded after the duration in its `kq.dev/runtime` annotation (counted from
Running); without the annotation it runs until a control hook ends it. A pod
being deleted gracefully is terminated (phase Failed unless it already ended)
and then removed. Readiness overrides from the control API (`notReady`,
`neverReady`) keep matching pods un-ready.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubesim.controllers.conditions import condition_true, set_condition
from kubesim.controllers.ownership import is_terminal
from kubesim.controllers.workqueue import WorkQueue, per_key
from kubesim.durations import parse_duration
from kubesim.resources import PODS, ResourceType
from kubesim.store import now_rfc3339
from kubesim.watch import DELETED

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

RUNTIME_ANNOTATION = "kq.dev/runtime"
_EPSILON = 0.002  # loop timers may fire a clock tick early
log = logging.getLogger("kubesim")

PodKey = tuple[str, str]


class Kubelet:
    def __init__(self, cluster: Cluster) -> None:
        self._c = cluster
        self._store = cluster.store
        self.queue: WorkQueue[PodKey] = WorkQueue("kubelet", per_key(self.reconcile, "kubelet"))
        self._started: dict[str, float] = {}  # pod uid -> loop time it went Running
        self._ips = 0
        self._store.subscribe(PODS, self._on_pod)

    def _on_pod(self, etype: str, rt: ResourceType, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        meta = new["metadata"]
        if etype == DELETED:
            self._forget(meta["uid"])
            return
        if is_terminal(new) and not meta.get("deletionTimestamp"):
            self._forget(meta["uid"])
            return
        self.queue.add((meta["namespace"], meta["name"]))

    def _forget(self, uid: str) -> None:
        self._started.pop(uid, None)
        self._c.timers.cancel(("ready", uid))
        self._c.timers.cancel(("runtime", uid))

    def poke(self, key: PodKey) -> None:
        self.queue.add(key)

    # --- reconcile one pod ---

    def reconcile(self, key: PodKey) -> None:
        ns, name = key
        e = self._store.find(PODS, ns, name)
        if e is None:
            return
        pod = e.obj
        meta, status = pod["metadata"], pod.get("status") or {}
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):
            if meta.get("deletionGracePeriodSeconds"):
                if not is_terminal(pod):
                    self._terminate(ns, name, succeeded=False, reason="Error", exit_code=137)
                self._store.delete(PODS, ns, name, grace_seconds=0)
            self._forget(uid)
            return
        if is_terminal(pod):
            return
        outcome = self._c.outcome_for(pod)
        if outcome is not None:
            self._terminate(ns, name, succeeded=outcome, reason="Completed" if outcome else "Error",
                            exit_code=0 if outcome else 1)
            return
        if not pod.get("spec", {}).get("nodeName"):
            return
        now = asyncio.get_running_loop().time()
        if status.get("phase", "Pending") == "Pending":
            self._start(ns, name, pod)
            self._started[uid] = now
            self._c.timers.call_later(self._c.ready_delay_s, ("ready", uid), lambda: self.queue.add(key))
            runtime = _runtime(pod, self._c.sleep_scale)
            if runtime is not None:
                self._c.timers.call_later(runtime, ("runtime", uid), lambda: self.queue.add(key))
            return
        started = self._started.setdefault(uid, now)
        runtime = _runtime(pod, self._c.sleep_scale)
        if runtime is not None and now + _EPSILON >= started + runtime:
            self._terminate(ns, name, succeeded=True, reason="Completed", exit_code=0)
            return
        want_ready = self._c.readiness_override(pod) is None and now + _EPSILON >= started + self._c.ready_delay_s
        if want_ready != condition_true(pod, "Ready"):
            self._set_ready(ns, name, want_ready)
        elif not want_ready and self._c.readiness_override(pod) is None:
            self._c.timers.call_later(started + self._c.ready_delay_s - now, ("ready", uid),
                                      lambda: self.queue.add(key))

    # --- status writes ---

    def _start(self, ns: str, name: str, pod: Mapping[str, Any]) -> None:
        self._ips += 1
        ip = f"10.244.{(self._ips >> 8) & 255}.{self._ips & 255}"
        now = now_rfc3339()

        def running(p: dict[str, Any]) -> None:
            st = p.setdefault("status", {})
            st["phase"] = "Running"
            st["hostIP"] = "10.0.0.1"
            st["podIP"] = ip
            st["podIPs"] = [{"ip": ip}]
            st["startTime"] = now
            for ctype, value, reason in (
                ("PodReadyToStartContainers", "True", ""),
                ("Initialized", "True", ""),
                ("Ready", "False", "ContainersNotReady"),
                ("ContainersReady", "False", "ContainersNotReady"),
                ("PodScheduled", "True", ""),
            ):
                set_condition(st, ctype, value, reason, "", now)
            st["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"kubesim://{p['metadata']['uid']}/{c['name']}",
                    "ready": False,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in p.get("spec", {}).get("containers", [])
            ]

        self._store.modify(PODS, ns, name, running, status_only=True)

    def _set_ready(self, ns: str, name: str, ready: bool) -> None:
        now = now_rfc3339()

        def change(p: dict[str, Any]) -> None:
            st = p.setdefault("status", {})
            names = [c.get("name") for c in st.get("containerStatuses", [])]
            msg = "" if ready else f"containers with unready status: [{' '.join(n for n in names if n)}]"
            reason = "" if ready else "ContainersNotReady"
            value = "True" if ready else "False"
            set_condition(st, "Ready", value, reason, msg, now)
            set_condition(st, "ContainersReady", value, reason, msg, now)
            for cs in st.get("containerStatuses", []):
                cs["ready"] = ready

        self._store.modify(PODS, ns, name, change, status_only=True)

    def _terminate(self, ns: str, name: str, *, succeeded: bool, reason: str, exit_code: int) -> None:
        now = now_rfc3339()

        def end(p: dict[str, Any]) -> None:
            st = p.setdefault("status", {})
            st["phase"] = "Succeeded" if succeeded else "Failed"
            pod_reason = "PodCompleted" if succeeded else "PodFailed"
            set_condition(st, "Ready", "False", pod_reason, "", now)
            set_condition(st, "ContainersReady", "False", pod_reason, "", now)
            started = st.get("startTime", now)
            statuses = st.get("containerStatuses") or [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "restartCount": 0}
                for c in p.get("spec", {}).get("containers", [])
            ]
            for cs in statuses:
                cs["ready"] = False
                cs["started"] = False
                cs["state"] = {"terminated": {"exitCode": exit_code, "reason": reason,
                                              "startedAt": started, "finishedAt": now}}
            st["containerStatuses"] = statuses

        self._store.modify(PODS, ns, name, end, status_only=True)


def _runtime(pod: Mapping[str, Any], sleep_scale: float = 1.0) -> float | None:
    """How long the pod runs: its kq.dev/runtime annotation, else what its containers sleep."""
    text = (pod["metadata"].get("annotations") or {}).get(RUNTIME_ANNOTATION)
    if text is None:
        slept = [_sleep_seconds(c) for c in pod.get("spec", {}).get("containers") or []]
        if not slept or any(s is None for s in slept):
            return None
        return max(s for s in slept if s is not None) * sleep_scale
    try:
        return parse_duration(text)
    except ValueError:
        log.warning("kubesim: pod %s/%s: bad %s %r; it runs until told",
                    pod["metadata"].get("namespace"), pod["metadata"]["name"], RUNTIME_ANNOTATION, text)
        return None


_ECHO = re.compile(r"""^\s*echo(\s+("[^"]*"|'[^']*'|[^\s"';&|<>`$]+))*\s*$""")
_SLEEP = re.compile(r"^\s*(?:exec\s+)?sleep\s+(\d+(?:\.\d+)?)(s|m|h)?\s*$")


def _sleep_seconds(container: Mapping[str, Any]) -> float | None:
    """A container whose whole job is `sleep N` (as in Kueue's sample Job), possibly after `echo`s in a
    shell line (`echo hi && sleep 3`, as in Kueue's pod samples), runs N seconds; kubesim runs no
    containers, so this is all it can honour. Anything else runs until told."""
    argv = [*(container.get("command") or []), *(container.get("args") or [])]
    if len(argv) >= 2 and argv[-2] == "-c" and argv[0].rsplit("/", 1)[-1] in ("sh", "bash"):
        line = argv[-1]
    elif argv and argv[0].rsplit("/", 1)[-1] == "sleep":
        line = " ".join(argv)
    else:
        return None
    total = 0.0
    for part in re.split(r"&&|;", line):
        if _ECHO.match(part):
            continue
        m = _SLEEP.match(part)
        if not m:
            return None
        total += float(m.group(1)) * {None: 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    return total
