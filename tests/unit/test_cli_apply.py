"""kq apply / create / delete input checks: every document is checked before anything is sent.

The e2e tests show the cluster stays unchanged; here the refusal itself: exit code 1,
an error naming the field, and no attempt to reach a cluster (the kubeconfig given
does not exist, so any attempt would fail differently).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kq.api import InputError, kind_info
from kq.cli.apply import Source, UsageError, load_sources, merge_patch, read_sources, resource_ref
from kq.cli.main import main

GOOD_CQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
"""
GOOD_LQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq}
spec: {clusterQueue: cq}
"""
BAD = {
    "invalid-yaml": ("kind: [unclosed", "invalid YAML"),
    "unknown-field": (GOOD_LQ.replace("clusterQueue: cq", "clusterQueue: cq, colour: red"), "spec.colour"),
    "bad-quantity": (GOOD_CQ.replace("nominalQuota: 4", "nominalQuota: 4 cores"), "nominalQuota"),
    "wrong-api-version": (GOOD_LQ.replace("v1beta2", "v9"), "apiVersion/kind"),
    "missing-name": (GOOD_LQ.replace("metadata: {name: lq}", "metadata: {namespace: x}"), "metadata.name"),
    "unknown-metadata-field": (GOOD_LQ.replace("{name: lq}", "{name: lq, lables: {a: b}}"), "metadata.lables"),
}


@pytest.mark.parametrize(("text", "field"), [pytest.param(*v, id=k) for k, v in BAD.items()])
def test_bad_document_names_the_field(text: str, field: str) -> None:
    with pytest.raises(InputError) as exc:
        load_sources([Source("good.yaml", GOOD_CQ), Source("bad.yaml", text)], namespace=None, verb="apply")
    assert field in str(exc.value)
    assert "bad.yaml" in str(exc.value)


@pytest.mark.parametrize(("text", "field"), [pytest.param(*v, id=k) for k, v in BAD.items()])
def test_apply_with_a_bad_document_exits_1_before_contacting_any_cluster(
    tmp_path: Path, text: str, field: str
) -> None:
    (tmp_path / "a-good.yaml").write_text(GOOD_CQ)
    (tmp_path / "b-bad.yaml").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = main(["apply", "-f", str(tmp_path), "--kubeconfig", str(tmp_path / "no-such-kubeconfig")],
                out=out, err=err)
    assert code == 1
    assert out.getvalue() == ""  # nothing was created, not even the good object before the bad one
    assert field in err.getvalue()
    assert "no-such-kubeconfig" not in err.getvalue()


def test_objects_get_the_default_namespace_or_the_one_given() -> None:
    objs = load_sources([Source("f", GOOD_CQ + "---\n" + GOOD_LQ)], namespace=None, verb="apply")
    assert [(o.kind_info.kind, o.namespace, o.body["metadata"].get("namespace")) for o in objs] == [
        ("ClusterQueue", "", None), ("LocalQueue", "default", "default")]
    objs = load_sources([Source("f", GOOD_LQ)], namespace="team", verb="apply")
    assert (objs[0].namespace, objs[0].body["metadata"]["namespace"]) == ("team", "team")


def test_namespace_flag_conflicting_with_the_object_is_refused() -> None:
    text = GOOD_LQ.replace("{name: lq}", "{name: lq, namespace: a}")
    with pytest.raises(UsageError, match="does not match the namespace 'b'"):
        load_sources([Source("f", text)], namespace="b", verb="apply")


@pytest.mark.parametrize(("verb", "ok"), [("create", True), ("apply", False), ("delete", False)])
def test_generate_name_only_with_create(verb: str, ok: bool) -> None:
    text = GOOD_LQ.replace("{name: lq}", "{generateName: lq-}")
    if ok:
        [obj] = load_sources([Source("f", text)], namespace=None, verb=verb)
        assert obj.body["metadata"]["generateName"] == "lq-"
    else:
        with pytest.raises(UsageError, match=f"cannot use generateName with {verb}"):
            load_sources([Source("f", text)], namespace=None, verb=verb)


def test_an_empty_file_is_refused() -> None:
    with pytest.raises(UsageError, match="no objects"):
        load_sources([Source("empty.yaml", "---\n")], namespace=None, verb="apply")


def test_read_sources_takes_files_directories_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("b")
    (tmp_path / "a.yml").write_text("a")
    (tmp_path / "notes.txt").write_text("ignored")
    one = tmp_path / "one.json"
    one.write_text("{}")
    got = read_sources([str(tmp_path / "b.yaml"), str(tmp_path), "-"], io.StringIO("from stdin"))
    assert [(Path(s.name).name, s.text) for s in got] == [
        ("b.yaml", "b"), ("a.yml", "a"), ("b.yaml", "b"), ("one.json", "{}"), ("<stdin>", "from stdin")]


def test_read_sources_refuses_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        read_sources([str(tmp_path / "nope.yaml")])


@pytest.mark.parametrize(("kind", "ref"), [("job", "job.batch"), ("cq", "clusterqueue.kueue.x-k8s.io"),
                                           ("namespace", "namespace"), ("wl", "workload.kueue.x-k8s.io")])
def test_resource_refs_read_like_kubectl(kind: str, ref: str) -> None:
    assert resource_ref(kind_info(kind)) == ref


def test_the_examples_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    setup = load_sources(read_sources([str(root / "single-clusterqueue-setup.yaml")]), namespace=None, verb="apply")
    assert [o.ref() for o in setup] == ["ResourceFlavor default-flavor", "ClusterQueue cluster-queue",
                                        "LocalQueue default/user-queue"]
    [job] = load_sources(read_sources([str(root / "sample-job.yaml")]), namespace=None, verb="create")
    assert job.obj.metadata.generate_name == "sample-job-" and job.obj.spec.suspend is None
    demo = load_sources(read_sources([str(root / "demo")]), namespace=None, verb="apply")
    jobs = [o for o in demo if o.kind_info.kind == "Job"]
    assert len(jobs) >= 3
    assert all("kq.dev/runtime" in j.obj.spec.template.metadata.annotations for j in jobs)


LIVE = {"metadata": {"name": "cq", "resourceVersion": "7", "labels": {"a": "1"}},
        "spec": {"cohortName": "x", "queueingStrategy": "BestEffortFIFO", "resourceGroups": [{"n": 1}]},
        "status": {"pendingWorkloads": 3}}


@pytest.mark.parametrize(
    ("patch", "changed", "check"),
    [
        pytest.param({"metadata": {"name": "cq"}, "spec": {"cohortName": "x"}}, False, None, id="same-values"),
        pytest.param({"spec": {"cohortName": "y"}}, True, lambda m: m["spec"]["cohortName"] == "y", id="scalar"),
        pytest.param({"spec": {"resourceGroups": [{"n": 2}]}}, True,
                     lambda m: m["spec"]["resourceGroups"] == [{"n": 2}], id="lists-replaced-whole"),
        pytest.param({"metadata": {"labels": {"a": None}}}, True, lambda m: m["metadata"]["labels"] == {},
                     id="null-removes"),
        pytest.param({"metadata": {"labels": {"b": "2"}}}, True,
                     lambda m: m["metadata"]["labels"] == {"a": "1", "b": "2"}, id="maps-merged"),
    ],
)
def test_merge_patch(patch: dict, changed: bool, check: object) -> None:
    merged = merge_patch(LIVE, patch)
    assert (merged != LIVE) is changed
    assert merged["status"] == {"pendingWorkloads": 3}  # untouched fields stay
    if check is not None:
        assert check(merged)  # type: ignore[operator]  # the table mixes callables and None
