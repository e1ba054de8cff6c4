"""Kueue v1beta1 / v1alpha1 objects are converted to v1beta2 the way Kueue's conversion functions do."""

from __future__ import annotations

import copy

import pytest
import yaml

from kq.api import InputError, load_documents
from kq.api.convert import ConversionError, convert_to_v1beta2, is_legacy
from kq.api.topology import TopologyDomain, topology_domains


def _doc(text: str) -> dict:
    return yaml.safe_load(text)


# (id, legacy object, expected v1beta2 object)
CASES = [
    (
        "clusterqueue",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: team
  admissionChecks: [ac-1, ac-2]
  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: Preempt}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: "4"}]}]
status:
  pendingWorkloads: 1
  pendingWorkloadsStatus: {clusterQueuePendingWorkload: [], lastChangeTime: "2025-01-01T00:00:00Z"}
  fairSharing: {weightedShare: 3, admissionFairSharingStatus: {consumedResources: {}, lastUpdate: "2025-01-01T00:00:00Z"}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: team
  admissionChecksStrategy: {admissionChecks: [{name: ac-1}, {name: ac-2}]}
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: "4"}]}]
status:
  pendingWorkloads: 1
  fairSharing: {weightedShare: 3}
""",
    ),
    (
        "clusterqueue-fungibility-kept",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec: {flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec: {flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor}}
""",
    ),
    (
        "localqueue",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
status:
  flavorUsage: [{name: f, resources: [{name: cpu, total: "1"}]}]
  flavors: [{name: f, resources: [cpu]}]
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ns}
spec: {clusterQueue: cq}
status:
  flavorsUsage: [{name: f, resources: [{name: cpu, total: "1"}]}]
""",
    ),
    (
        "cohort-v1alpha1",
        """
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Cohort
metadata: {name: team}
spec: {parent: org}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
""",
    ),
    (
        "cohort-v1beta1",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
status: {fairSharing: {weightedShare: 1, admissionFairSharingStatus: {consumedResources: {}}}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
status: {fairSharing: {weightedShare: 1}}
""",
    ),
    (
        "multikueuecluster",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: MultiKueueCluster
metadata: {name: worker1}
spec: {kubeConfig: {locationType: Secret, location: worker1-secret}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker1}
spec: {clusterSource: {kubeConfig: {locationType: Secret, location: worker1-secret}}}
""",
    ),
    (
        "multikueuecluster-v1alpha1-profile",
        """
apiVersion: kueue.x-k8s.io/v1alpha1
kind: MultiKueueCluster
metadata: {name: worker1}
spec: {kubeConfig: {locationType: Secret, location: ""}, clusterProfileRef: {name: p}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker1}
spec: {clusterSource: {clusterProfileRef: {name: p}}}
""",
    ),
    (
        "admissioncheck",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: ac}
spec: {controllerName: kueue.x-k8s.io/multikueue, retryDelayMinutes: 15,
       parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mk}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: ac}
spec: {controllerName: kueue.x-k8s.io/multikueue, parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: mk}}
""",
    ),
    (
        "workload-workload-priority",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  priorityClassName: high
  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
  priority: 100
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]
status:
  accumulatedPastExexcutionTimeSeconds: 42
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}
  priority: 100
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]
status:
  accumulatedPastExecutionTimeSeconds: 42
""",
    ),
    (
        "workload-pod-priority",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  priorityClassName: system-high
  priorityClassSource: scheduling.k8s.io/priorityclass
  priority: 1000
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  priorityClassRef: {group: scheduling.k8s.io, kind: PriorityClass, name: system-high}
  priority: 1000
""",
    ),
    (
        "topology-v1alpha1-unchanged",
        """
apiVersion: kueue.x-k8s.io/v1alpha1
kind: Topology
metadata: {name: t}
spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: t}
spec: {levels: [{nodeLabel: rack}, {nodeLabel: kubernetes.io/hostname}]}
""",
    ),
    (
        "resourceflavor-unchanged",
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: f}
spec: {nodeLabels: {a: b}}
""",
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
spec: {nodeLabels: {a: b}}
""",
    ),
]


@pytest.mark.parametrize(("legacy", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_convert(legacy, expected):
    src = _doc(legacy)
    before = copy.deepcopy(src)
    assert convert_to_v1beta2(src) == _doc(expected)
    assert src == before  # the input is left alone


def test_topology_assignment_domains_become_slices():
    src = _doc(
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  podSets: [{name: main, count: 3, template: {spec: {containers: [{name: c}]}}}]
status:
  admission:
    clusterQueue: cq
    podSetAssignments:
    - name: main
      count: 3
      topologyAssignment:
        levels: [rack, kubernetes.io/hostname]
        domains:
        - {values: [rack-1, node-1], count: 2}
        - {values: [rack-1, node-2], count: 1}
"""
    )
    (obj,) = load_documents(yaml.safe_dump(src), "wl.yaml")
    assert obj.body["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    ta = obj.obj.status.admission.pod_set_assignments[0].topology_assignment
    assert ta.levels == ("rack", "kubernetes.io/hostname")
    assert "domains" not in obj.body["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert topology_domains(ta) == [TopologyDomain(("rack-1", "node-1"), 2), TopologyDomain(("rack-1", "node-2"), 1)]


def test_v1beta1_loads_as_v1beta2():
    (obj,) = load_documents(CASES[0][1], "old.yaml")
    assert obj.kind_info.version == "v1beta2"
    assert obj.obj.spec.cohort_name == "team"
    assert obj.obj.spec.admission_checks_strategy.admission_checks[1].name == "ac-2"
    assert obj.body["apiVersion"] == "kueue.x-k8s.io/v1beta2"


CONFLICTS = [
    (
        "cohort-and-cohortName",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec: {cohort: a, cohortName: b}\n",
        "spec.cohort: cannot be set together with cohortName",
    ),
    (
        "admissionChecks-and-strategy",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\n"
        "spec: {admissionChecks: [a], admissionChecksStrategy: {admissionChecks: [{name: b}]}}\n",
        "spec.admissionChecks: cannot be set together with admissionChecksStrategy",
    ),
    (
        "priority-name-without-source",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        "spec: {priorityClassName: high, podSets: [{name: main, count: 1, template: {}}]}\n",
        "spec.priorityClassSource: must be",
    ),
    (
        "bad-domains",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\n"
        "spec: {podSets: [{name: main, count: 1, template: {}}]}\n"
        "status: {admission: {clusterQueue: cq, podSetAssignments: [{name: main, topologyAssignment: "
        "{levels: [rack], domains: [{values: rack-1, count: 1}]}}]}}\n",
        "status.admission.podSetAssignments[0].topologyAssignment.domains[0]",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CONFLICTS], ids=[c[0] for c in CONFLICTS])
def test_conversion_errors_name_the_field(text, expected):
    with pytest.raises(ConversionError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        convert_to_v1beta2(_doc(text))
    with pytest.raises(InputError, match=r"old\.yaml"):
        load_documents(text, "old.yaml")


def test_only_known_legacy_versions_convert():
    assert is_legacy("kueue.x-k8s.io/v1beta1", "Workload")
    assert is_legacy("kueue.x-k8s.io/v1alpha1", "Cohort")
    assert not is_legacy("kueue.x-k8s.io/v1alpha1", "ClusterQueue")  # never served as v1alpha1
    assert not is_legacy("kueue.x-k8s.io/v1beta2", "ClusterQueue")
    with pytest.raises(ConversionError):
        convert_to_v1beta2({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"})
