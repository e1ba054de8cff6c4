"""The shared TAS example scenarios (../shared/scenarios/examples/tas/) played on the core alone.

Objects go through kq.api's loader and services.tas.core.from_api, workloads are placed
in step order (a workload that does not fit preempts lower-priority holds when the
core's what-if finds a minimal set), and every `topology` check must match exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kq.api.core import Node
from kq.api.kueue import ResourceFlavor, Topology
from kq.api.load import load_object
from kq.api.workload import Workload
from services.tas.core import Placement, TasSolver
from services.tas.core.from_api import amounts, flavor_spec, node_info, podset_request

EXAMPLES = Path(__file__).resolve().parents[4] / "shared" / "scenarios" / "examples" / "tas"
FILES = sorted(EXAMPLES.glob("*.yaml"))


def _pod_requests(ps: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in ps.template.spec.containers:
        for r, v in amounts(c.resources.requests).items():
            total[r] = total.get(r, 0) + v
    return total


def play(doc: dict[str, Any]) -> tuple[dict[str, Placement | None], dict[str, bool]]:
    objs = [load_object(o, "scenario").obj for o in doc["objects"]]
    topologies = {o.metadata.name: o for o in objs if isinstance(o, Topology)}
    solver = TasSolver()
    for o in objs:
        if isinstance(o, ResourceFlavor) and o.spec.topology_name:
            solver.set_flavor(flavor_spec(o, topologies[o.spec.topology_name]))
        if isinstance(o, Node):
            solver.upsert_node(node_info(o))
    flavor = next(iter(solver.trees))
    placed: dict[str, Placement | None] = {}
    preempted: dict[str, bool] = {}
    priority: dict[str, int] = {}
    for step in doc["steps"]:
        wl = load_object(step["apply"], "step").obj
        assert isinstance(wl, Workload)
        key = f"{wl.metadata.namespace}/{wl.metadata.name}"
        priority[key] = wl.spec.priority or 0
        pod_sets = [podset_request(ps, _pod_requests(ps)) for ps in wl.spec.pod_sets]
        requests = [p for p in pod_sets if p is not None]
        outcome = solver.place_and_assume(key, flavor, requests)
        if not isinstance(outcome, Placement):
            lower = sorted((k for k in solver.holds if priority[k] < priority[key]), key=lambda k: priority[k])
            victims = solver.minimal_victims(flavor, requests, lower)
            if victims:
                for v in victims:
                    solver.release(v)
                    placed[v] = None
                    preempted[v] = True
                outcome = solver.place_and_assume(key, flavor, requests)
        placed[key] = outcome if isinstance(outcome, Placement) else None
    return placed, preempted


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_example_scenario_placements(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    placed, preempted = play(doc)
    checked = 0
    for check in doc["checks"]:
        for key, want in check.get("workloads", {}).items():
            got = placed.get(key)
            if want.get("state") == "admitted":
                assert got is not None, f"{key} not placed"
            if want.get("state") == "pending":
                assert got is None, f"{key} placed: {got}"
            if "preempted" in want:
                assert preempted.get(key, False) == want["preempted"]
            for pod_set, domains in want.get("topology", {}).items():
                assert got is not None
                placement = got.for_pod_set(pod_set)
                assert placement is not None
                assert [(list(d.values), d.count) for d in placement.domains] == [
                    (d["values"], d["count"]) for d in domains]
                checked += 1
    assert checked > 0


def test_the_six_examples_are_there() -> None:
    assert len(FILES) >= 6
