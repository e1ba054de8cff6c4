"""The one place that builds and parses NATS subjects.

Kubernetes names may contain dots, which NATS uses as the token separator, so
names are escaped: "." becomes "~" (never valid in a Kubernetes name).
Cluster-scoped objects use "_" as their namespace token (never valid either).
"""

from __future__ import annotations

import re
from typing import NamedTuple

VERSION = "v1"
PREFIX = f"kq.{VERSION}"

# Streams and buckets.
OBJECTS_STREAM = "KQ_OBJECTS"
COMMANDS_STREAM = "KQ_CMD"
EVENTS_STREAM = "KQ_EVENTS"
MK_STREAM = "KQ_MK"
LEASE_BUCKET = "KQ_LEASES"
TIMERS_STREAM = "KQ_TIMERS"

OBJECTS_ALL = f"{PREFIX}.obj.>"
SYNC_ALL = f"{PREFIX}.sync.>"
COMMANDS_ALL = f"{PREFIX}.cmd.>"
EVENTS_ALL = f"{PREFIX}.evt.>"
OUTCOMES_ALL = f"{PREFIX}.out.>"
DEAD_LETTERS_ALL = f"{PREFIX}.dlq.>"
TAS_SOLVE = f"{PREFIX}.tas.solve"
TIMERS_ALL = f"{PREFIX}.timer.>"

_CLUSTER_SCOPE = "_"


_NOT_IN_TOKEN = re.compile(r"[ \t\r\n*>~]")  # one search, not a scan per character (every subject built)


def escape(token: str) -> str:
    if not token:
        raise ValueError("empty subject token")
    if _NOT_IN_TOKEN.search(token):
        raise ValueError(f"cannot use {token!r} in a subject")
    return token.replace(".", "~")


def unescape(token: str) -> str:
    return token.replace("~", ".")


def _ns(namespace: str | None) -> str:
    return escape(namespace) if namespace else _CLUSTER_SCOPE


class ObjectKey(NamedTuple):
    cluster: str
    kind: str  # lower-case Kubernetes kind: "workload", "clusterqueue", "job", ...
    namespace: str  # "" for cluster-scoped objects
    name: str


def object_subject(cluster: str, kind: str, namespace: str | None, name: str) -> str:
    """Last value of one object in the mirror."""
    return f"{PREFIX}.obj.{escape(cluster)}.{kind.lower()}.{_ns(namespace)}.{escape(name)}"


def object_filter(cluster: str = "*", kind: str = "*") -> str:
    """A filter over the mirror: every object of a kind (or all kinds) in a cluster (or all)."""
    c = cluster if cluster == "*" else escape(cluster)
    k = kind if kind == "*" else kind.lower()
    return f"{PREFIX}.obj.{c}.{k}.>"


def parse_object_subject(subject: str) -> ObjectKey:
    parts = subject.split(".")
    if len(parts) != 7 or parts[0] != "kq" or parts[1] != VERSION or parts[2] != "obj":
        raise ValueError(f"not an object subject: {subject!r}")
    ns = "" if parts[5] == _CLUSTER_SCOPE else unescape(parts[5])
    return ObjectKey(unescape(parts[3]), parts[4], ns, unescape(parts[6]))


def sync_subject(cluster: str, kind: str) -> str:
    """Marker the watcher publishes after each full list of a kind (in KQ_OBJECTS, so it is ordered)."""
    return f"{PREFIX}.sync.{escape(cluster)}.{kind.lower()}"


def parse_sync_subject(subject: str) -> tuple[str, str]:
    parts = subject.split(".")
    if len(parts) != 5 or parts[2] != "sync":
        raise ValueError(f"not a sync subject: {subject!r}")
    return unescape(parts[3]), parts[4]


def command_subject(cluster: str, kind: str, writer: str | None = None) -> str:
    """A command for `cluster`; services name themselves as `writer` (the last token), so that a
    bus user may send commands only as itself (kq.bus_users) and the watcher can check the
    command's own `writer` field against it."""
    base = f"{PREFIX}.cmd.{escape(cluster)}.{kind.lower()}"
    return base if writer is None else f"{base}.{escape(writer)}"


def command_writer(subject: str) -> str | None:
    """The writer a command subject names, None for the short form without one."""
    parts = subject.split(".")
    if len(parts) < 5 or parts[2] != "cmd":
        raise ValueError(f"not a command subject: {subject!r}")
    return unescape(parts[5]) if len(parts) == 6 else None


def command_filter(cluster: str = "*") -> str:
    c = cluster if cluster == "*" else escape(cluster)
    return f"{PREFIX}.cmd.{c}.>"


def outcome_subject(writer: str, cluster: str) -> str:
    """Where the watcher reports what became of a writer's command."""
    return f"{PREFIX}.out.{escape(writer)}.{escape(cluster)}"


def event_subject(cluster: str, kind: str, namespace: str | None, name: str) -> str:
    """Decisions with reasons (audit, `kq describe`). Keyed by cluster like everything else."""
    return f"{PREFIX}.evt.{escape(cluster)}.{kind.lower()}.{_ns(namespace)}.{escape(name)}"


def event_filter(cluster: str = "*", kind: str = "*", namespace: str | None = None, name: str | None = None) -> str:
    c = cluster if cluster == "*" else escape(cluster)
    k = kind if kind == "*" else kind.lower()
    if name is None:
        return f"{PREFIX}.evt.{c}.{k}.>"
    return f"{PREFIX}.evt.{c}.{k}.{_ns(namespace)}.{escape(name)}"


def dead_letter_subject(service: str) -> str:
    return f"{PREFIX}.dlq.{escape(service)}"


def visibility_subject(cluster: str) -> str:
    """Request/reply: pending workloads with positions (kq.visibility), answered by the admission leader."""
    return f"{PREFIX}.visibility.{escape(cluster)}"


def health_subject(service: str) -> str:
    return f"{PREFIX}.health.{escape(service)}"


def lease_key(service: str, partition: str) -> str:
    """KV key of a writer's lease (KV keys allow dots, so the partition stays readable)."""
    return f"{escape(service)}.{escape(partition)}"


def mk_pending_subject(namespace: str, name: str) -> str:
    return f"{PREFIX}.mk.pending.{escape(namespace)}.{escape(name)}"


def mk_settled_subject(namespace: str, name: str) -> str:
    return f"{PREFIX}.mk.settled.{escape(namespace)}.{escape(name)}"


def mk_nominate_subject(namespace: str, name: str) -> str:
    return f"{PREFIX}.mk.nominate.{escape(namespace)}.{escape(name)}"


def timer_schedule_subject(service: str, timer: str) -> str:
    """A service's durable timer (a JetStream message schedule), named by the service: publishing on
    it again replaces the timer, purging it cancels it."""
    return f"{PREFIX}.timer.sched.{escape(service)}.{escape(timer)}"


def timer_fire_subject(service: str, timer: str) -> str:
    """Where the server stores a service's timer message when it fires."""
    return f"{PREFIX}.timer.fire.{escape(service)}.{escape(timer)}"


def timer_fire_filter(service: str) -> str:
    return f"{PREFIX}.timer.fire.{escape(service)}.>"


MK_NOMINATE_ALL = f"{PREFIX}.mk.nominate.>"


def parse_mk_subject(subject: str) -> tuple[str, str, str]:
    """(verb, namespace, name) of a kq.v1.mk.<verb>.<ns>.<name> subject."""
    parts = subject.split(".")
    if len(parts) != 6 or parts[0] != "kq" or parts[1] != VERSION or parts[2] != "mk":
        raise ValueError(f"not a MultiKueue subject: {subject!r}")
    return parts[3], unescape(parts[4]), unescape(parts[5])
