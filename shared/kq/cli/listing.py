"""`kq list`: kueuectl's list. For workloads, kueuectl's columns with each pending workload's position in
its LocalQueue (the visibility API, asked of the admission leader); other kinds list as `kq get` does.

    kq list workloads [-n NS | -A] [--clusterqueue CQ] [--localqueue LQ] [--status pending|admitted|finished|...]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec
import nats.errors

from kq import subjects
from kq.cli import busread
from kq.cli.apply import UsageError, kind_or_usage
from kq.cli.tables import Table, age, render
from kq.cli.target import resolve
from kq.cli.views import workload_state
from kq.visibility import PendingWorkloadsRequest, answer_decoder

if TYPE_CHECKING:
    from kq.cli.objects import Streams

STATUSES = ("pending", "quotareserved", "admitted", "evicted", "deactivated", "finished")


def _cluster_queue_of(wl: Any, queue_of: Mapping[tuple[str, str], str]) -> str:
    """Where it holds quota, else where its LocalQueue points."""
    if wl.status.admission is not None:
        return str(wl.status.admission.cluster_queue)
    return queue_of.get((wl.metadata.namespace or "", wl.spec.queue_name), "")


def list_table(workloads: Sequence[Any], queue_of: Mapping[tuple[str, str], str],
               positions: Mapping[tuple[str, str], int], now: datetime, *, all_namespaces: bool) -> Table:
    """kueuectl's `list workload` columns. Pure: positions and each LocalQueue's ClusterQueue are passed in."""
    rows = []
    for wl in workloads:
        ns, name = wl.metadata.namespace or "", wl.metadata.name
        owner = wl.metadata.controller_ref()
        job_type = (f"{owner.kind.lower()}.{owner.api_version.split('/')[0]}" if "/" in owner.api_version
                    else owner.kind.lower()) if owner else ""
        cq = _cluster_queue_of(wl, queue_of)
        pos = positions.get((ns, name))
        row = (name, job_type, owner.name if owner else "", wl.spec.queue_name, cq, workload_state(wl).upper(),
               "" if pos is None else str(pos), age(wl.metadata.creation_timestamp, now))
        rows.append((ns, *row) if all_namespaces else row)
    headers = ("NAME", "JOB TYPE", "JOB NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION IN QUEUE", "AGE")
    return Table(("NAMESPACE", *headers) if all_namespaces else headers, rows)


async def _positions(nc: Any, cluster: str, queues: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for ns, lq in sorted(queues):
        req = PendingWorkloadsRequest(namespace=ns, local_queue=lq, limit=1_000_000)
        try:
            msg = await nc.request(subjects.visibility_subject(cluster), msgspec.json.encode(req), timeout=2)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
            return out  # no admission leader: positions stay empty, as kueuectl shows them without a visibility API
        summary = answer_decoder.decode(msg.data).summary
        for w in summary.items if summary is not None else ():
            out[(w.metadata.namespace, w.metadata.name)] = w.position_in_local_queue
    return out


async def cmd_list(args: argparse.Namespace, io: Streams) -> int:
    info = kind_or_usage(args.kind)
    if info.token != "workload":
        from kq.cli.objects import cmd_get  # every other kind lists as kq get shows it

        args.names, args.output, args.watch = [], None, False
        return await cmd_get(args, io)
    if args.status and args.status.lower() not in STATUSES:
        raise UsageError(f"--status: {args.status!r} is not one of {', '.join(STATUSES)}")
    target = resolve(args)
    ns = None if args.all_namespaces else (args.namespace or "default")
    async with busread.connected(target.need_nats()) as bus:
        view = await busread.mirror(bus, target.cluster, "workload")
        queues = await busread.mirror(bus, target.cluster, "localqueue")
        wls = [w for w in view.typed_items(target.cluster, "workload")
               if (ns is None or w.metadata.namespace == ns)
               and (not args.localqueue or w.spec.queue_name == args.localqueue)
               and (not args.status or workload_state(w).lower() == args.status.lower())]
        queue_of = {(q.metadata.namespace or "", q.metadata.name): q.spec.cluster_queue
                    for q in queues.typed_items(target.cluster, "localqueue")}
        if args.clusterqueue:
            wls = [w for w in wls if _cluster_queue_of(w, queue_of) == args.clusterqueue]
        waiting = {(w.metadata.namespace or "", w.spec.queue_name) for w in wls
                   if w.status.admission is None and w.spec.queue_name}
        positions = await _positions(bus.nc, target.cluster, waiting)
    if not wls:
        print(f"No resources found{f' in {ns} namespace' if ns else ''}.", file=io.err)
        return 0
    io.out.write(render(list_table(wls, queue_of, positions, datetime.now(UTC), all_namespaces=ns is None)))
    return 0
