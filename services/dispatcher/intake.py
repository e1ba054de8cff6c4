"""Which manager Workload records can concern the dispatcher, without decoding them.

The dispatcher follows every Workload of the manager, but acts only on one that carries a MultiKueue
admission check (Term.mk_check: a status.admissionChecks entry naming an AdmissionCheck of the
MultiKueue controller). A Workload without one is reconciled to nothing, so its record is not worth a
full decode and a reconcile task: a byte search and, when the field is there, a decode of the check
names alone decide. A record that stops carrying the check needs nothing either (reconcile would
return at once); a deleted one always goes through (its copies are removed).

The set of MultiKueue check names changes with AdmissionCheck records; every such change makes the
term reconcile all workloads again (mark_all), which filters with the new set, so a Workload filtered
out before its AdmissionCheck was seen is picked up then. Before the first MultiKueue AdmissionCheck
the term does not even follow Workloads and Jobs (Term._follow_workloads).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kq.api import constants as k
from kq.api.kueue import AdmissionCheck
from kq.mirror import ObjectRecord

_FIELD = b'"admissionChecks"'


class _CheckName(msgspec.Struct, frozen=True):
    name: str = ""


class _Status(msgspec.Struct, frozen=True, rename="camel"):
    admission_checks: list[_CheckName] = []


class _Checks(msgspec.Struct, frozen=True):
    status: _Status = _Status()


_decoder = msgspec.json.Decoder(_Checks)


def check_names(raw: bytes) -> frozenset[str] | None:
    """The names in a Workload's status.admissionChecks; None when the JSON does not say (it is then
    treated as concerning: the full decode reports what is wrong)."""
    if _FIELD not in raw:
        return frozenset()
    try:
        return frozenset(c.name for c in _decoder.decode(raw).status.admission_checks)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def multikueue_checks(checks: Iterable[AdmissionCheck]) -> frozenset[str]:
    """The AdmissionChecks Term.mk_check would take for a MultiKueue one."""
    return frozenset(ac.metadata.name for ac in checks
                     if ac.spec.controller_name == k.MULTIKUEUE_CONTROLLER_NAME and ac.spec.parameters is not None)


def may_concern(rec: ObjectRecord, mk_checks: frozenset[str]) -> bool:
    """Whether this manager Workload record could make the dispatcher do anything."""
    if rec.deleted:
        return True
    names = check_names(rec.raw)
    return names is None or not names.isdisjoint(mk_checks)
