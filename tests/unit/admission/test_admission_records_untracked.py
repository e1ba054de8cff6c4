"""The scheduler's records stay out of the cyclic collector's walks (core/model.py `_Rec`): it keeps
every pending workload's, and a full collection over them stopped the scheduler for seconds."""

from __future__ import annotations

import gc

from services.admission.core import model


def test_core_records_are_not_tracked_by_the_cyclic_collector() -> None:
    pod_set = model.PodSet(name="main", count=1, requests={"cpu": 1000})
    selector = model.LabelSelectorRequirement(key="a", operator="In", values=("b",))
    assert [gc.is_tracked(r) for r in (pod_set, selector)] == [False, False]
