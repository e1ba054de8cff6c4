"""Node failure for TAS workloads (Kueue's node failure controller, behaviour only). Pure.

A node that is NotReady or gone, named by an admitted workload's topology assignment (by its
hostname), is recorded in that workload's status.unhealthyNodes; the admission scheduler then
acts on it (see services/admission/core/check_rules.py).
"""

from __future__ import annotations

from kq.api.core import Node
from kq.api.kueue import Workload
from kq.api.meta import find_condition
from kq.api.topology import topology_domains

HOSTNAME_LABEL = "kubernetes.io/hostname"


def node_failed(node: Node | None) -> bool:
    if node is None:
        return True
    ready = next((c for c in node.status.conditions if c.type == "Ready"), None)
    return ready is None or ready.status != "True"


def uses_node(wl: Workload, node_name: str, hostname: str) -> bool:
    """Is any pod of the workload's topology assignment on this node?"""
    admission = wl.status.admission
    if admission is None:
        return False
    fin = find_condition(wl.status.conditions, "Finished")
    if fin is not None and fin.status == "True":
        return False
    for psa in admission.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or HOSTNAME_LABEL not in ta.levels:
            continue
        at = list(ta.levels).index(HOSTNAME_LABEL)
        if any(d.values[at] in (node_name, hostname) for d in topology_domains(ta)):
            return True
    return False


def unhealthy_patch(wl: Workload, node_name: str) -> dict[str, object] | None:
    """The status merge patch recording the node (None when it is recorded already)."""
    names = [n.name for n in wl.status.unhealthy_nodes]
    if node_name in names:
        return None
    return {
        "metadata": {"resourceVersion": wl.metadata.resource_version},
        "status": {"unhealthyNodes": [{"name": n} for n in [*names, node_name]]},
    }
