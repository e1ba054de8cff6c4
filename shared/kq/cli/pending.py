"""`kq get pendingworkloads cq/NAME | lq/NAME [-n NS]`: Kueue's visibility API (kq.visibility), asked of
the admission leader over the bus: pending workloads in queue order with their positions."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
import nats.errors
import yaml

from kq import subjects
from kq.cli import busread
from kq.cli.tables import Table, age, render
from kq.cli.target import resolve
from kq.visibility import PendingWorkload, PendingWorkloadsRequest, PendingWorkloadsSummary, answer_decoder

if TYPE_CHECKING:
    from kq.cli.objects import Streams

KINDS = ("pendingworkloads", "pendingworkload", "pw")
_QUEUE_KINDS = {"cq": "cq", "clusterqueue": "cq", "clusterqueues": "cq",
                "lq": "lq", "localqueue": "lq", "localqueues": "lq", "queue": "lq"}


class PendingUsageError(ValueError):
    pass


def request_for(names: list[str], namespace: str | None) -> PendingWorkloadsRequest:
    if len(names) != 1 or "/" not in names[0]:
        raise PendingUsageError("name one queue: kq get pendingworkloads cq/NAME, or lq/NAME [-n NAMESPACE]")
    kind, _, name = names[0].partition("/")
    which = _QUEUE_KINDS.get(kind.lower())
    if which is None or not name:
        raise PendingUsageError(f"{names[0]!r}: expected cq/NAME or lq/NAME")
    if which == "cq":
        return PendingWorkloadsRequest(cluster_queue=name)
    return PendingWorkloadsRequest(namespace=namespace or "default", local_queue=name)


def table(summary: PendingWorkloadsSummary, now: datetime) -> str:
    rows = [(str(w.position_in_cluster_queue), str(w.position_in_local_queue), w.metadata.namespace, w.metadata.name,
             w.local_queue_name, str(w.priority), age(w.metadata.creation_timestamp, now)) for w in summary.items]
    return render(Table(("POSITION IN CQ", "POSITION IN LQ", "NAMESPACE", "NAME", "LOCALQUEUE", "PRIORITY", "AGE"),
                        rows))


async def cmd_get_pending(args: argparse.Namespace, io: Streams) -> int:
    try:
        req = request_for(list(args.names), args.namespace)
    except PendingUsageError as e:
        print(f"error: {e}", file=io.err)
        return 2
    target = resolve(args)
    async with busread.connected(target.need_nats()) as bus:
        try:
            msg = await bus.nc.request(subjects.visibility_subject(target.cluster), msgspec.json.encode(req), timeout=3)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
            print(f"error: no admission leader answers for cluster {target.cluster!r}", file=io.err)
            return 1
    ans = answer_decoder.decode(msg.data)
    if ans.error or ans.summary is None:
        print(f"error: {ans.error or f'{args.names[0]} not found'}", file=io.err)
        return 1
    if args.output in ("json", "yaml"):
        doc = msgspec.to_builtins(ans.summary)
        io.out.write(json.dumps(doc, indent=4) + "\n" if args.output == "json"
                     else yaml.safe_dump(doc, sort_keys=False))
    elif ans.summary.items:
        io.out.write(table(ans.summary, datetime.now(UTC)))
    else:
        print(f"No pending workloads in {args.names[0]}.", file=io.err)
    return 0


async def position_of(nc: Any, cluster: str, namespace: str, queue: str, name: str) -> PendingWorkload | None:
    """A pending workload's entry in its LocalQueue (None when not pending there or no leader answers)."""
    req = PendingWorkloadsRequest(namespace=namespace, local_queue=queue, limit=1_000_000)
    try:
        msg = await nc.request(subjects.visibility_subject(cluster), msgspec.json.encode(req), timeout=2)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
        return None
    ans = answer_decoder.decode(msg.data)
    items = ans.summary.items if ans.summary is not None else ()
    return next((w for w in items if w.metadata.name == name and w.metadata.namespace == namespace), None)
