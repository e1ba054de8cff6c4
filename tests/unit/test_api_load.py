"""kq.api.load: user input is checked field by field; every rejection names the source, document and field."""

from __future__ import annotations

import textwrap

import pytest

from kq.api import InputError, core, kueue, load_documents, load_object

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: "default-flavor"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: "cluster-queue"
spec:
  namespaceSelector: {} # match all.
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: "default-flavor"
      resources:
      - name: "cpu"
        nominalQuota: 9
      - name: "memory"
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: "default"
  name: "user-queue"
spec:
  clusterQueue: "cluster-queue"
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        command: [ "/bin/sh" ]
        args: [ "-c", "sleep 60" ]
        resources:
          requests:
            cpu: 1
            memory: "200Mi"
      restartPolicy: Never
---
"""


def test_loads_a_kueue_setup():
    objs = load_documents(SETUP, "setup.yaml")
    assert [o.kind_info.kind for o in objs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Job"]
    assert [o.index for o in objs] == [1, 2, 3, 4]
    assert all(o.source == "setup.yaml" for o in objs)
    cq = objs[1].obj
    assert isinstance(cq, kueue.ClusterQueue)
    # numbers become quantity strings, in the typed object and in the body sent to the API server
    assert cq.spec.resource_groups[0].flavors[0].resources[0].nominal_quota == "9"
    assert objs[1].body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "9"
    job = objs[3]
    assert isinstance(job.obj, core.Job)
    assert job.obj.spec.template.spec.containers[0].resources.requests == {"cpu": "1", "memory": "200Mi"}
    # the body keeps what kq does not model, for the API server
    assert job.body["spec"]["template"]["spec"]["containers"][0]["image"].startswith("registry.k8s.io/")
    assert job.body["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job.ref() == "Job default/sample-job-*"
    assert objs[2].ref() == "LocalQueue default/user-queue"


def test_load_object_and_list_documents():
    obj = load_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}, "cli")
    assert obj.name == "team-a" and obj.namespace == ""
    objs = load_documents(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: 2.5}}}\n",
        "list.yaml",
    )
    assert [o.name for o in objs] == ["a", "n1"]
    assert objs[1].obj.status.allocatable == {"cpu": "2.5"}


def test_empty_input_has_no_objects():
    assert load_documents("", "empty.yaml") == []
    assert load_documents("---\n---\n", "empty.yaml") == []


def _cq(spec: str, cohort: str = "") -> str:
    return "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n" + textwrap.indent(
        textwrap.dedent(spec), "  "
    )


ONE_GROUP = """
resourceGroups:
- coveredResources: [cpu, memory]
  flavors:
  - name: f1
    resources:
    - {name: cpu, nominalQuota: %s}
    - {name: memory, nominalQuota: 1Gi}
"""

WL = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: w, namespace: ns}
spec:
  queueName: q
  podSets:
%s
"""


def _podset(name="main", count=1, extra="", requests="{cpu: 1}"):
    return textwrap.indent(
        f"- name: {name}\n  count: {count}\n{extra}  template:\n    spec:\n      containers:\n"
        f"      - {{name: c, resources: {{requests: {requests}}}}}\n",
        "  ",
    )


# (id, input, expected substrings of the error)
REJECTIONS = [
    ("invalid-yaml", "kind: [", ["bad.yaml: invalid YAML"]),
    ("not-a-mapping", "- a\n- b\n", ["document 1", "expected a mapping"]),
    ("missing-apiversion", "kind: Pod\nmetadata: {name: p}\n", ["apiVersion: required"]),
    ("missing-kind", "apiVersion: v1\nmetadata: {name: p}\n", ["kind: required"]),
    (
        "unknown-apiversion",
        "apiVersion: kueue.x-k8s.io/v9\nkind: ClusterQueue\nmetadata: {name: cq}\n",
        ["kind: unknown apiVersion/kind kueue.x-k8s.io/v9/ClusterQueue", "served as kueue.x-k8s.io/v1beta2"],
    ),
    ("unknown-kind", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n", ["unknown apiVersion/kind apps/v1"]),
    ("framework-not-built", "apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: r}\n",
     ["kind: ray.io/v1/RayService", "ray.io/rayservice", "not available in kq yet"]),
    ("pod-group-total-count", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: n, labels: "
     "{kueue.x-k8s.io/pod-group-name: g}, annotations: {kueue.x-k8s.io/pod-group-total-count: two}}\n"
     "spec: {containers: [{name: c}]}\n", ["kueue.x-k8s.io/pod-group-total-count", "positive integer"]),
    ("missing-metadata", "apiVersion: v1\nkind: Namespace\n", ["metadata: required"]),
    ("missing-name", "apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n", ["metadata.name: required"]),
    ("bad-name", "apiVersion: v1\nkind: Namespace\nmetadata: {name: Team_A}\n", ["metadata.name:", "not a valid name"]),
    (
        "metadata-typo",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, lables: {x: y}}\n",
        ['metadata.lables: unknown field (did you mean "labels"?)'],
    ),
    (
        "namespace-on-cluster-scoped",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f, namespace: ns}\n",
        ["metadata.namespace: ResourceFlavor is cluster-scoped"],
    ),
    (
        "core-top-level-typo",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nsepc: {parallelism: 1}\n",
        ['sepc: unknown field (did you mean "spec"?)'],
    ),
    ("unknown-field-kueue", _cq("cohrt: team\n"), ['spec.cohrt: unknown field (did you mean "cohortName"?)']),
    (
        "unknown-field-nested",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n  - name: f\n    resources:\n"
            "    - {name: cpu, nominalQuta: 1}\n"
        ),
        ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuta: unknown field"],
    ),
    (
        "missing-required-kueue-field",
        _cq("resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n  - name: f\n    resources:\n    - {name: cpu}\n"),
        ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: required field is missing"],
    ),
    (
        "bad-quota-quantity",
        _cq(ONE_GROUP % "abc"),
        ['ClusterQueue cq', 'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: bad quantity "abc"'],
    ),
    (
        "negative-quota",
        _cq(ONE_GROUP % "-1"),
        ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must be non-negative"],
    ),
    ("bad-quantity-spaces", _cq(ONE_GROUP % '"5 Gi"'), ['nominalQuota: bad quantity "5 Gi"']),
    ("bad-quantity-bool", _cq(ONE_GROUP % "true"), ["nominalQuota: bad quantity True"]),
    (
        "bad-fair-sharing-weight",
        _cq("fairSharing: {weight: 1.2.3}\n"),
        ['spec.fairSharing.weight: bad quantity "1.2.3"'],
    ),
    (
        # Kueue's docs example (admin/concurrent-admission-setup.yaml) needs its alpha gate; kq has no such feature.
        "concurrent-admission-not-implemented",
        _cq("concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}\n"),
        ["spec.concurrentAdmissionPolicy: not supported: kq does not implement Kueue's ConcurrentAdmission (alpha)"],
    ),
    (
        # Kueue's docs example (admission-fs/admission-fair-sharing-setup.yaml): kq has no admission fair sharing.
        "admission-fair-sharing-not-implemented",
        _cq("admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}\n"),
        ["spec.admissionScope.admissionMode: not supported: kq does not implement Kueue's admission fair sharing"],
    ),
    (
        "local-queue-weight-is-admission-fair-sharing",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq, namespace: ns}\n"
        "spec: {clusterQueue: cq, fairSharing: {weight: '1'}}\n",
        ["spec.fairSharing: not supported: kq does not implement Kueue's admission fair sharing"],
    ),
    (
        "bad-job-request",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j, namespace: ns}\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - {name: c, resources: {requests: {cpu: 1ii}}}\n",
        ['spec.template.spec.containers[0].resources.requests[cpu]: bad quantity "1ii"'],
    ),
    (
        "bad-pod-limit",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n"
        "  initContainers: [{name: i, resources: {limits: {nvidia.com/gpu: x}}}]\n",
        ['spec.initContainers[0].resources.limits[nvidia.com/gpu]: bad quantity "x"'],
    ),
    (
        "bad-node-allocatable",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {memory: 16GB}}\n",
        ['status.allocatable[memory]: bad quantity "16GB"'],
    ),
    (
        "bad-workload-request",
        WL % _podset(requests="{memory: abc}"),
        ['spec.podSets[0].template.spec.containers[0].resources.requests[memory]: bad quantity "abc"'],
    ),
    (
        "bad-jobset-request",
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js, namespace: ns}\nspec:\n"
        "  replicatedJobs:\n  - name: w\n    template:\n      spec:\n        template:\n          spec:\n"
        "            containers: [{name: c, resources: {requests: {cpu: lots}}}]\n",
        ['spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.requests[cpu]: bad quantity "lots"'],
    ),
    (
        "resources-count-mismatch",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu, memory]\n  flavors:\n  - name: f\n    resources:\n"
            "    - {name: cpu, nominalQuota: 1}\n"
        ),
        ["spec.resourceGroups[0].flavors[0].resources: must list the coveredResources ['cpu', 'memory']"],
    ),
    (
        "resources-name-mismatch",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu, memory]\n  flavors:\n  - name: f\n    resources:\n"
            "    - {name: cpu, nominalQuota: 1}\n    - {name: memroy, nominalQuota: 1Gi}\n"
        ),
        ['spec.resourceGroups[0].flavors[0].resources[1].name: must be "memory" to match coveredResources[1]'],
    ),
    (
        "duplicate-covered-resource",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]\n"
            "- coveredResources: [cpu]\n  flavors: [{name: b, resources: [{name: cpu, nominalQuota: 1}]}]\n"
        ),
        ['spec.resourceGroups[1].coveredResources[0]: duplicate resource "cpu"'],
    ),
    (
        "duplicate-flavor",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n"
            "  - {name: a, resources: [{name: cpu, nominalQuota: 1}]}\n  - {name: a, resources: [{name: cpu, nominalQuota: 2}]}\n"
        ),
        ['spec.resourceGroups[0].flavors[1].name: duplicate flavor "a"'],
    ),
    (
        "borrowing-limit-without-cohort",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n"
            "  - {name: a, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1}]}\n"
        ),
        ["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must not be set without spec.cohortName"],
    ),
    (
        "lending-limit-without-cohort",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors:\n"
            "  - {name: a, resources: [{name: cpu, nominalQuota: 4, lendingLimit: 1}]}\n"
        ),
        ["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must not be set without spec.cohortName"],
    ),
    (
        "lending-limit-above-nominal",
        _cq(
            "cohortName: team\nresourceGroups:\n- coveredResources: [cpu]\n  flavors:\n"
            "  - {name: a, resources: [{name: cpu, nominalQuota: 4, lendingLimit: 5}]}\n"
        ),
        ["spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than or equal to nominalQuota"],
    ),
    (
        "cohort-limit-without-parent",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: c}\nspec:\n  resourceGroups:\n"
        "  - coveredResources: [cpu]\n    flavors: [{name: a, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1}]}]\n",
        ["spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must not be set without spec.parentName"],
    ),
    (
        "invalid-enum",
        _cq("queueingStrategy: StrictFifo\n"),
        ["spec.queueingStrategy: invalid enum value 'StrictFifo' (expected one of: BestEffortFIFO, StrictFIFO)"],
    ),
    (
        "borrow-within-cohort-needs-reclaim",
        _cq("preemption: {borrowWithinCohort: {policy: LowerPriority}}\n"),
        ["spec.preemption.borrowWithinCohort.policy: must be Never when reclaimWithinCohort is Never"],
    ),
    (
        "fungibility-preference",
        _cq("flavorFungibility: {preference: BorrowingOverPreemption}\n"),
        ["spec.flavorFungibility.preference: can only be set when whenCanBorrow and whenCanPreempt are both"],
    ),
    (
        "on-flavors-unknown",
        _cq(
            "resourceGroups:\n- coveredResources: [cpu]\n  flavors: [{name: a, resources: [{name: cpu, nominalQuota: 1}]}]\n"
            "admissionChecksStrategy: {admissionChecks: [{name: ac, onFlavors: [b]}]}\n"
        ),
        ['spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: "b" is not a flavor of this ClusterQueue'],
    ),
    (
        "bad-namespace-selector",
        _cq("namespaceSelector: {matchExpressions: [{key: team, operator: In}]}\n"),
        ["spec.namespaceSelector: team: operator In needs at least one value"],
    ),
    (
        "wrong-type",
        WL % _podset(count='"three"'),
        ["Workload ns/w", "spec.podSets[0].count: expected `int`, got `str`"],
    ),
    (
        "two-podsets-with-mincount",
        WL % (_podset("a", 4, "  minCount: 2\n") + _podset("b", 4, "  minCount: 1\n")),
        ["spec.podSets: at most one podSet can use minCount, 2 do"],
    ),
    ("mincount-above-count", WL % _podset("a", 2, "  minCount: 3\n"), ["spec.podSets[0].minCount: must be at most count (2)"]),
    ("duplicate-podset", WL % (_podset("a") + _podset("a")), ['spec.podSets[1].name: duplicate podSet "a"']),
    ("no-podsets", WL % "    []", ["spec.podSets: must have at least one podSet"]),
    ("reserved-pods-key", WL % _podset(requests="{pods: 1}"), ["spec.podSets[0].template.spec.containers[0].resources.requests[pods]: the key is reserved"]),
    (
        "priority-class-ref-without-priority",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n"
        "  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: high}\n" + "  podSets:\n"
        + _podset(),
        ["spec.priority: must be set when priorityClassRef is set"],
    ),
    (
        "topology-levels",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\nspec:\n  levels:\n"
        "  - {nodeLabel: kubernetes.io/hostname}\n  - {nodeLabel: rack}\n  - {nodeLabel: rack}\n",
        ["spec.levels[0].nodeLabel: kubernetes.io/hostname can only be the lowest level", 'spec.levels[2].nodeLabel: duplicate level "rack"'],
    ),
    (
        "topology-without-spec",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: t}\n",
        ["spec: required field is missing"],
    ),
    (
        "second-document",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {}\n",
        ["bad.yaml (document 2, Namespace): metadata.name: required"],
    ),
    (
        "v1beta1-priority-without-source",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w, namespace: ns}\nspec:\n"
        "  priorityClassName: high\n  podSets:\n" + _podset(),
        ["spec.priorityClassSource: must be"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in REJECTIONS], ids=[c[0] for c in REJECTIONS])
def test_rejections_name_the_field(text, expected):
    with pytest.raises(InputError) as info:
        load_documents(text, "bad.yaml")
    message = str(info.value)
    assert message.startswith("bad.yaml")
    for part in expected:
        assert part in message, message


def test_every_problem_is_reported_at_once():
    text = _cq(
        "resourceGroups:\n- coveredResources: [cpu, memory]\n  flavors:\n  - name: f\n    resources:\n"
        "    - {name: cpu, nominalQuota: abc, borrowingLimit: 2}\n    - {name: memry, nominalQuota: 1Gi}\n"
    )
    with pytest.raises(InputError) as info:
        load_documents(text, "cq.yaml")
    assert [str(e) for e in info.value.errors] == [
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: bad quantity "abc": '
        "must match <sign><number><suffix>, e.g. 500m, 2, 1.5Gi",
        "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must not be set without spec.cohortName",
        'spec.resourceGroups[0].flavors[0].resources[1].name: must be "memory" to match coveredResources[1]',
    ]
    assert info.value.where == "cq.yaml (document 1, ClusterQueue cq)"


def test_one_podset_with_mincount_is_fine():
    (obj,) = load_documents(WL % (_podset("a", 4, "  minCount: 2\n") + _podset("b", 4)), "ok.yaml")
    assert [ps.min_count for ps in obj.obj.spec.pod_sets] == [2, None]


def test_limits_with_a_cohort_are_fine():
    text = _cq(
        "cohortName: team\nresourceGroups:\n- coveredResources: [cpu]\n  flavors:\n"
        "  - {name: a, resources: [{name: cpu, nominalQuota: 4, borrowingLimit: 1, lendingLimit: 0.5}]}\n"
    )
    (obj,) = load_documents(text, "ok.yaml")
    rq = obj.obj.spec.resource_groups[0].flavors[0].resources[0]
    assert (rq.borrowing_limit, rq.lending_limit) == ("1", "0.5")


# Found by the hostile-input fuzzing (tests/fuzz): labels and annotations the API server refuses
# went through kq apply's checks and failed only at the server, after earlier documents were sent.
@pytest.mark.parametrize("labels, annotations, field", [
    pytest.param({"a": "x" * (1 << 20)}, {}, "metadata.labels[a]", id="1MiB-label"),
    pytest.param({"Bad Key": "v"}, {}, "metadata.labels[Bad Key]", id="label-key-with-a-space"),
    pytest.param({"a/b/c": "v"}, {}, "metadata.labels[a/b/c]", id="label-key-two-slashes"),
    pytest.param({"a": "ü"}, {}, "metadata.labels[a]", id="unicode-label-value"),
    pytest.param({}, {"note": "x" * (1 << 20)}, "metadata.annotations", id="1MiB-annotation"),
    pytest.param({}, {"x" * 300: "v"}, "metadata.annotations[", id="annotation-key-too-long"),
])
def test_labels_and_annotations_the_api_server_refuses_are_refused_before_sending(labels, annotations, field):
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
           "metadata": {"name": "rf", "labels": labels, "annotations": annotations}}
    with pytest.raises(InputError) as e:
        load_object(doc, "f.yaml")
    assert any(err.path.startswith(field) for err in e.value.errors), e.value.errors


def test_a_large_but_lawful_annotation_is_accepted():
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
           "metadata": {"name": "rf", "labels": {"kueue.x-k8s.io/x": "ok"}, "annotations": {"note": "x" * 200_000}}}
    assert load_object(doc, "f.yaml").name == "rf"
