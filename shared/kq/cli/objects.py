"""The object commands: apply, create, delete (through the cluster's API) and get, describe (from the bus)."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import IO, Any

import msgspec
import yaml

from kq.api import KindInfo
from kq.api.events import Event
from kq.api.meta import LabelSelector, selector_matches
from kq.api.registry import decode_object
from kq.cli import busread, pending
from kq.cli.apply import (
    Reporter,
    UsageError,
    apply_objects,
    create_objects,
    delete_named,
    delete_objects,
    kind_or_usage,
    load_sources,
    read_sources,
)
from kq.cli.describe import describe_workload
from kq.cli.selectors import SelectorSyntaxError, parse_selector
from kq.cli.tables import render
from kq.cli.target import Target, resolve
from kq.cli.views import table_for
from kq.kube import KubeClient
from kq.mirror import MirrorView, ObjectRecord, SyncMarker
from kq.scenario.refs import JOB_KINDS


class Streams:
    def __init__(self, out: IO[str], err: IO[str], stdin: IO[str] | None = None) -> None:
        self.out, self.err, self.stdin = out, err, stdin


async def _client(target: Target) -> KubeClient:
    return await KubeClient.from_kubeconfig(target.need_kubeconfig(), context=target.context)


# -- apply / create / delete ---------------------------------------------------------------------


async def cmd_write(args: argparse.Namespace, io: Streams) -> int:
    """apply, create, and delete -f: everything is checked before the first request."""
    verb = args.command
    sources = read_sources(args.filename or [], io.stdin)
    objs = load_sources(sources, namespace=args.namespace, verb=verb)
    target = resolve(args)
    client = await _client(target)
    report = Reporter(io.out, io.err)
    try:
        if verb == "apply":
            await apply_objects(client, objs, report)
        elif verb == "create":
            await create_objects(client, objs, report)
        else:
            await delete_objects(client, objs, report)
    finally:
        await client.close()
    return 1 if report.failures else 0


async def cmd_delete(args: argparse.Namespace, io: Streams) -> int:
    if args.filename:
        if args.kind:
            raise UsageError("give either -f FILE or KIND NAME..., not both")
        return await cmd_write(args, io)
    if not args.kind or not args.names:
        raise UsageError("give -f FILE, or KIND NAME... (e.g. kq delete workload my-wl -n default)")
    info = kind_or_usage(args.kind)
    client = await _client(resolve(args))
    report = Reporter(io.out, io.err)
    try:
        for name in args.names:
            await delete_named(client, info, args.namespace or "default", name, report)
    finally:
        await client.close()
    return 1 if report.failures else 0


# -- get -------------------------------------------------------------------------------------------


def _selected(view: MirrorView, cluster: str, info: KindInfo, namespace: str | None) -> list[ObjectRecord]:
    recs = view.items(cluster, info.token)
    if info.namespaced and namespace is not None:
        recs = [r for r in recs if r.namespace == namespace]
    return recs


def _scope(info: KindInfo, args: argparse.Namespace) -> str | None:
    """The namespace to list, or None for all (cluster-scoped kinds, -A)."""
    if not info.namespaced or args.all_namespaces:
        return None
    return args.namespace or "default"


def _not_found(info: KindInfo, name: str) -> str:
    res = f"{info.plural}.{info.group}" if info.group else info.plural
    return f'Error from server (NotFound): {res} "{name}" not found'


def _dump(docs: list[Any], single: bool, fmt: str) -> str:
    doc: Any = docs[0] if single else {"apiVersion": "v1", "kind": "List", "items": docs,
                                       "metadata": {"resourceVersion": ""}}
    if fmt == "json":
        return json.dumps(doc, indent=4) + "\n"
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def _selector(args: argparse.Namespace) -> LabelSelector | None:
    text = getattr(args, "selector", None)
    if not text:
        return None
    try:
        return parse_selector(text)
    except SelectorSyntaxError as e:
        raise UsageError(str(e)) from None


def _labelled(rec: ObjectRecord, typed: Any, selector: LabelSelector | None) -> bool:
    return selector is None or selector_matches(selector, typed.metadata.labels)


async def cmd_get(args: argparse.Namespace, io: Streams) -> int:
    if args.kind.lower() in pending.KINDS:  # Kueue's visibility API: asked of the admission leader
        return await pending.cmd_get_pending(args, io)
    info = kind_or_usage(args.kind)
    selector = _selector(args)
    watch = getattr(args, "watch", False)
    if watch and args.output in ("yaml", "json", "name"):
        raise UsageError("-w prints table rows; leave out -o yaml|json|name")
    target = resolve(args)
    async with busread.connected(target.need_nats()) as bus:
        view = await busread.mirror(bus, target.cluster, info.token)
        code = _print_get(args, io, view, target.cluster, info, selector)
        if watch:
            await _watch(args, io, bus, view, target.cluster, info, selector)
    return code


def _print_get(args: argparse.Namespace, io: Streams, view: MirrorView, cluster: str, info: KindInfo,
               selector: LabelSelector | None) -> int:
    ns = _scope(info, args)
    recs = [r for r in _selected(view, cluster, info, ns) if _labelled(r, view.typed(r.key), selector)]
    failed = False
    if args.names:
        by_name: dict[str, Any] = {}
        for r in recs:
            by_name.setdefault(r.name, r)
        picked = []
        for name in args.names:
            if name in by_name:
                picked.append(by_name[name])
            else:
                print(_not_found(info, name), file=io.err)
                failed = True
        recs = picked
    if args.output in ("yaml", "json"):
        if recs or not args.names:  # kubectl prints an empty List rather than "No resources found"
            docs = [msgspec.json.decode(r.raw) for r in recs]
            io.out.write(_dump(docs, len(args.names) == 1 and len(recs) == 1, args.output))
    elif args.output == "name":
        for r in recs:
            print(f"{info.kind.lower()}.{info.group}/{r.name}" if info.group else f"{info.kind.lower()}/{r.name}",
                  file=io.out)
    elif recs:
        objs = [o for o in (view.typed(r.key) for r in recs) if o is not None]
        for key, why in sorted(view.invalid.items()):
            print(f"error: {key.kind} {key.namespace + '/' if key.namespace else ''}{key.name}: {why}", file=io.err)
        now = datetime.now(UTC)
        io.out.write(render(table_for(info.token, objs, now, all_namespaces=info.namespaced and ns is None,
                                      wide=args.output == "wide")))
    if not recs and not args.names and args.output not in ("yaml", "json"):
        where = f" in {ns} namespace" if ns else ""
        print(f"No resources found{where}.", file=io.err)
    io.out.flush()
    return 1 if failed else 0


async def _watch(args: argparse.Namespace, io: Streams, bus: Any, view: MirrorView, cluster: str, info: KindInfo,
                 selector: LabelSelector | None) -> None:
    """`-w`: after the list, one row per change of a shown object, as kubectl get -w (until interrupted)."""
    ns = _scope(info, args)
    changed: asyncio.Queue[ObjectRecord] = asyncio.Queue()

    def on_change(what: ObjectRecord | SyncMarker) -> None:
        if isinstance(what, ObjectRecord) and what.kind == info.token and (ns is None or what.namespace == ns) \
                and (not args.names or what.name in args.names):
            changed.put_nowait(what)

    async with MirrorView().replay(bus, cluster, info.token, on_change=on_change) as follow:
        await follow.wait_caught_up(busread.READ_TIMEOUT_S)
        seen = {r.key: r.resource_version for r in view.items(cluster, info.token)}
        while True:
            rec = await changed.get()
            if seen.get(rec.key) == rec.resource_version and not rec.deleted:
                continue  # the replay's first pass: already listed
            seen[rec.key] = rec.resource_version
            obj = decode_object(info.token, rec.raw)
            if not _labelled(rec, obj, selector):
                continue
            table = table_for(info.token, [obj], datetime.now(UTC), all_namespaces=info.namespaced and ns is None,
                              wide=args.output == "wide")
            io.out.write(render(table).split("\n", 1)[1])  # the row without the header
            io.out.flush()


# -- describe --------------------------------------------------------------------------------------


def _split_ref(ref: str, namespace: str | None) -> tuple[str, str]:
    if "/" in ref:
        ns, _, name = ref.partition("/")
        if not ns or not name or "/" in name:
            raise UsageError(f"{ref!r}: expected NAMESPACE/NAME or NAME")
        return ns, name
    return namespace or "default", ref


def find_workload(view: MirrorView, cluster: str, namespace: str, name: str) -> Any | None:
    """The Workload called `name`, else the one a Job (JobSet, Pod, StatefulSet) called `name` owns."""
    recs = [r for r in view.items(cluster, "workload") if r.namespace == namespace]
    for r in recs:
        if r.name == name:
            return view.typed(r.key)
    for r in recs:
        wl = view.typed(r.key)
        if wl is None:
            continue
        owner = wl.metadata.controller_ref()
        if owner is not None and owner.kind in JOB_KINDS and owner.name == name:
            return wl
    return None


async def cmd_describe(args: argparse.Namespace, io: Streams) -> int:
    info = kind_or_usage(args.kind)
    if info.token != "workload":
        raise UsageError(f"kq describe supports workload only (use kq get {info.plural} NAME -o yaml)")
    target = resolve(args)
    ns, name = _split_ref(args.name, args.namespace)
    async with busread.connected(target.need_nats()) as bus:
        view = await busread.mirror(bus, target.cluster, "workload")
        wl = find_workload(view, target.cluster, ns, name)
        if wl is None:
            print(_not_found(info, f"{ns}/{name}"), file=io.err)
            return 1
        history = await busread.history(bus, target.cluster, "workload", ns, wl.metadata.name)
        position = await pending.position_of(bus.nc, target.cluster, ns, wl.spec.queue_name, wl.metadata.name) \
            if wl.spec.queue_name and wl.status.admission is None else None
    events = await _events_of(target, ns, wl.metadata.uid or "") if target.kubeconfig else None
    where = None if position is None else (position.position_in_cluster_queue, position.position_in_local_queue)
    io.out.write(describe_workload(wl, target.cluster, history, datetime.now(UTC), events, position=where))
    return 0


async def _events_of(target: Target, namespace: str, uid: str) -> list[Event]:
    """The Events recorded on one object (by uid), read from the API server as kubectl does."""
    client = await _client(target)
    try:
        items, _ = await client.list("event", namespace=namespace)
    finally:
        await client.close()
    events = [msgspec.json.decode(raw, type=Event) for raw in items]
    return [e for e in events if e.involved_object.uid == uid]


__all__ = ["Streams", "cmd_delete", "cmd_describe", "cmd_get", "cmd_write", "find_workload"]
