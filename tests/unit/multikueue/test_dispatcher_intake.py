"""Which manager Workload records reach the dispatcher's reconcile (services/dispatcher/intake.py):
only those that can carry a MultiKueue check, without a Workload decode for the others."""

from __future__ import annotations

from typing import Any

import msgspec

from kq import subjects
from kq.api import constants as k
from kq.api.registry import decode_object
from kq.mirror import DELETE, PUT, ObjectRecord, record_headers
from services.dispatcher.intake import check_names, may_concern, multikueue_checks
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.term import Term

from .mk_builders import SETTINGS, local

M = "manager"


def check(name: str, controller: str = k.MULTIKUEUE_CONTROLLER_NAME, params: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": controller}
    if params:
        spec["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": name}, "spec": spec}


def plain(name: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {"queueName": "q"}}


def record(raw: bytes, deleted: bool = False) -> ObjectRecord:
    return ObjectRecord(cluster=M, kind="workload", namespace="ns", name="w", deleted=deleted,
                        resource_version="1", uid="u", raw=raw)


def test_check_names_without_a_workload_decode() -> None:
    assert check_names(msgspec.json.encode(local())) == {"mk"}
    assert check_names(msgspec.json.encode(plain("a"))) == frozenset()
    assert check_names(b"not json at all") == frozenset()  # no such field: not even parsed
    assert check_names(b'{"status": {"admissionChecks": 3}}') is None  # unreadable: the full decode says why


def test_may_concern() -> None:
    mk = msgspec.json.encode(local())
    assert may_concern(record(mk), frozenset({"mk"}))
    assert not may_concern(record(mk), frozenset({"other"}))
    assert not may_concern(record(msgspec.json.encode(plain("a"))), frozenset({"mk"}))
    assert may_concern(record(msgspec.json.encode(plain("a")), deleted=True), frozenset())  # its copies go
    assert may_concern(record(b'{"status": {"admissionChecks": 3}}'), frozenset())


def test_multikueue_checks_are_those_mk_check_takes() -> None:
    acs = [decode_object("admissioncheck", msgspec.json.encode(c))
           for c in (check("mk"), check("prov", controller="kueue.x-k8s.io/provisioning-request"),
                     check("bare", params=False))]
    assert multikueue_checks(acs) == {"mk"}


def _put(term: Term, kind: str, obj: dict[str, Any], op: str = PUT) -> None:
    md = obj["metadata"]
    subject = subjects.object_subject(M, kind, md.get("namespace"), md["name"])
    term._on_record(term.view.apply(subject, record_headers(op, "1", md.get("uid", "u")),  # type: ignore[arg-type]
                                    msgspec.json.encode(obj)))


def test_a_workload_seen_before_its_check_is_reconciled_once_the_check_is_known() -> None:
    term = Term(None, M, None, SETTINGS, DispatcherSettings(), epoch=1)  # type: ignore[arg-type]
    mk_wl = msgspec.to_builtins(local())
    mk_wl["metadata"]["name"] = "mk-one"
    _put(term, "workload", mk_wl)
    _put(term, "workload", plain("plain-one"))
    assert term.dirty == set()  # no MultiKueue check known yet: nothing to reconcile
    _put(term, "admissioncheck", check("mk"))
    assert term._topology_dirty  # the loop re-marks every workload after the topology pass
    term.mark_all()
    assert term.dirty == {("ns", "mk-one")}
    _put(term, "workload", plain("plain-one"), op=DELETE)
    assert ("ns", "plain-one") in term.dirty  # a deletion always goes through
