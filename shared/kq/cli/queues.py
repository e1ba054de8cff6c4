"""kueuectl's verbs in kq: `create clusterqueue|localqueue|resourceflavor NAME [flags]` and
`stop|resume workload|localqueue|clusterqueue NAME`, with kueuectl's flags and meanings.

create builds the object from the flags and sends it through the same checks as `kq create -f`
(kq.api's validation names the bad field; nothing is sent). stop and resume merge-patch the one
field Kueue reads: a Workload's spec.active, a queue's spec.stopPolicy (stop drains what runs,
HoldAndDrain, unless --keep-already-running: Hold; resume: None).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import yaml

from kq.api.constants import KUEUE_API_VERSION
from kq.cli.apply import Reporter, Source, UsageError, create_objects, load_sources, resource_ref
from kq.cli.target import resolve
from kq.kube import KubeClient, KubeError, NotFound

if TYPE_CHECKING:
    from kq.cli.objects import Streams

CREATE_KINDS = {"clusterqueue": "ClusterQueue", "cq": "ClusterQueue", "localqueue": "LocalQueue",
                "lq": "LocalQueue", "resourceflavor": "ResourceFlavor", "rf": "ResourceFlavor"}
STOP_KINDS = {"workload": "workload", "wl": "workload", "localqueue": "localqueue", "lq": "localqueue",
              "clusterqueue": "clusterqueue", "cq": "clusterqueue"}


def _pairs(text: str, flag: str) -> dict[str, str]:
    """"a=1,b=2" -> {"a": "1", "b": "2"} (kubectl's label syntax)."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"{flag}: {item!r} is not KEY=VALUE")
        out[key] = value
    return out


def parse_quotas(text: str, flag: str) -> dict[str, dict[str, str]]:
    """kueuectl's quota syntax: "flavor1:cpu=4,memory=8Gi;flavor2:cpu=2" -> {flavor: {resource: quantity}}."""
    out: dict[str, dict[str, str]] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        flavor, colon, resources = part.partition(":")
        if not colon or not flavor:
            raise UsageError(f"{flag}: {part!r} is not FLAVOR:RESOURCE=QUANTITY[,RESOURCE=QUANTITY]")
        out[flavor] = _pairs(resources, flag)
    return out


def _resource_groups(args: argparse.Namespace) -> list[dict[str, Any]]:
    nominal = parse_quotas(args.nominal_quota or "", "--nominal-quota")
    limits = {"borrowingLimit": parse_quotas(args.borrowing_limit or "", "--borrowing-limit"),
              "lendingLimit": parse_quotas(args.lending_limit or "", "--lending-limit")}
    for field, given_limits in limits.items():
        for flavor, resources in given_limits.items():
            for res in resources:
                if res not in nominal.get(flavor, {}):
                    raise UsageError(f"{field} for {flavor}:{res} needs a nominal quota for it (--nominal-quota)")
    # Kueue's rule: one resource group per set of covered resources, flavors in the order given.
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for flavor, resources in nominal.items():
        quotas: list[dict[str, Any]] = []
        for res, quantity in resources.items():
            q: dict[str, Any] = {"name": res, "nominalQuota": quantity}
            for field, given in limits.items():
                if res in given.get(flavor, {}):
                    q[field] = given[flavor][res]
            quotas.append(q)
        groups.setdefault(tuple(sorted(resources)), []).append({"name": flavor, "resources": quotas})
    return [{"coveredResources": list(covered), "flavors": flavors} for covered, flavors in groups.items()]


def build_object(kind: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The object kueuectl would create from these flags."""
    doc: dict[str, Any] = {"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": {"name": name}}
    if kind == "ClusterQueue":
        spec: dict[str, Any] = {"resourceGroups": _resource_groups(args)}
        if args.cohort:
            spec["cohortName"] = args.cohort
        if args.queuing_strategy:
            spec["queueingStrategy"] = args.queuing_strategy
        spec["namespaceSelector"] = {"matchLabels": _pairs(args.namespace_selector, "--namespace-selector")} \
            if args.namespace_selector else {}
        preemption = {k: v for k, v in (("reclaimWithinCohort", args.reclaim_within_cohort),
                                        ("withinClusterQueue", args.preemption_within_cluster_queue)) if v}
        if preemption:
            spec["preemption"] = preemption
        doc["spec"] = spec
    elif kind == "LocalQueue":
        if not args.clusterqueue:
            raise UsageError("a LocalQueue needs its ClusterQueue: -c/--clusterqueue NAME")
        doc["metadata"]["namespace"] = args.namespace or "default"
        doc["spec"] = {"clusterQueue": args.clusterqueue}
    else:
        spec = {}
        if args.node_labels:
            spec["nodeLabels"] = _pairs(args.node_labels, "--node-labels")
        if args.node_taints:
            spec["nodeTaints"] = [_taint(t) for t in args.node_taints.split(",") if t.strip()]
        doc["spec"] = spec
    return doc


def _taint(text: str) -> dict[str, str]:
    """kubectl's taint syntax: KEY[=VALUE]:EFFECT."""
    kv, colon, effect = text.strip().rpartition(":")
    if not colon or not kv:
        raise UsageError(f"--node-taints: {text!r} is not KEY[=VALUE]:EFFECT")
    key, _, value = kv.partition("=")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


async def cmd_create_queue(args: argparse.Namespace, io: Streams) -> int:
    kind = CREATE_KINDS.get(args.kind.lower())
    if kind is None or len(args.names) != 1:
        raise UsageError("kq create clusterqueue|localqueue|resourceflavor NAME [flags], or kq create -f FILE")
    doc = build_object(kind, args.names[0], args)
    if kind == "LocalQueue" and not args.ignore_unknown_cq:
        await _need_cluster_queue(args, doc["spec"]["clusterQueue"])
    objs = load_sources([Source("<command line>", yaml.safe_dump(doc))], namespace=args.namespace, verb="create")
    client = await KubeClient.from_kubeconfig(resolve(args).need_kubeconfig(), context=args.context)
    report = Reporter(io.out, io.err)
    try:
        await create_objects(client, objs, report)
    finally:
        await client.close()
    return 1 if report.failures else 0


async def _need_cluster_queue(args: argparse.Namespace, name: str) -> None:
    client = await KubeClient.from_kubeconfig(resolve(args).need_kubeconfig(), context=args.context)
    try:
        if await client.get("clusterqueue", None, name) is None:
            raise UsageError(f"ClusterQueue {name!r} does not exist "
                             "(-i/--ignore-unknown-cq creates the LocalQueue anyway)")
    finally:
        await client.close()


def stop_patch(kind: str, stop: bool, keep_running: bool) -> dict[str, Any]:
    if kind == "workload":
        return {"spec": {"active": not stop}}
    return {"spec": {"stopPolicy": ("Hold" if keep_running else "HoldAndDrain") if stop else "None"}}


async def cmd_stop_resume(args: argparse.Namespace, io: Streams) -> int:
    kind = STOP_KINDS.get(args.kind.lower())
    if kind is None:
        raise UsageError(f"kq {args.command} workload|localqueue|clusterqueue NAME (got {args.kind!r})")
    stop = args.command == "stop"
    if args.keep_already_running and (not stop or kind == "workload"):
        raise UsageError("--keep-already-running is for kq stop localqueue|clusterqueue")
    namespace = None if kind == "clusterqueue" else (args.namespace or "default")
    client = await KubeClient.from_kubeconfig(resolve(args).need_kubeconfig(), context=args.context)
    failures = 0
    try:
        for name in args.names:
            ref = f"{resource_ref_for(kind)}/{name}"
            try:
                await client.patch(kind, namespace, name, stop_patch(kind, stop, args.keep_already_running),
                                   patch_type="merge")
            except NotFound:
                failures += 1
                print(f'Error from server (NotFound): {kind}s "{name}" not found', file=io.err)
                continue
            except KubeError as e:
                failures += 1
                print(f"error: {ref}: {e}", file=io.err)
                continue
            print(f"{ref} {'stopped' if stop else 'resumed'}", file=io.out)
    finally:
        await client.close()
    return 1 if failures else 0


def resource_ref_for(kind: str) -> str:
    from kq.api import kind_info

    return resource_ref(kind_info(kind))


def add_create_flags(p: argparse.ArgumentParser) -> None:
    """kueuectl's flags for create clusterqueue|localqueue|resourceflavor (beside -f for files)."""
    g = p.add_argument_group("create clusterqueue (kueuectl)")
    g.add_argument("--cohort", help="the cohort the ClusterQueue joins")
    g.add_argument("--queuing-strategy", choices=["StrictFIFO", "BestEffortFIFO"])
    g.add_argument("--namespace-selector", help="KEY=VALUE,... (default: every namespace)")
    g.add_argument("--reclaim-within-cohort", choices=["Never", "LowerPriority", "Any"])
    g.add_argument("--preemption-within-cluster-queue", choices=["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
    g.add_argument("--nominal-quota", help='FLAVOR:RESOURCE=QTY,...;FLAVOR2:... e.g. "default:cpu=4,memory=8Gi"')
    g.add_argument("--borrowing-limit", help="same syntax as --nominal-quota")
    g.add_argument("--lending-limit", help="same syntax as --nominal-quota")
    g = p.add_argument_group("create localqueue (kueuectl)")
    g.add_argument("-c", "--clusterqueue", help="the LocalQueue's ClusterQueue")
    g.add_argument("-i", "--ignore-unknown-cq", action="store_true",
                   help="create it even if the ClusterQueue is missing")
    g = p.add_argument_group("create resourceflavor (kueuectl)")
    g.add_argument("--node-labels", help="KEY=VALUE,...")
    g.add_argument("--node-taints", help="KEY[=VALUE]:EFFECT,...")
