"""The watcher's cache remembers the uids of deleted objects, so a command about one is refused
without a GET (MultiKueue deletes losing copies while their workers still decide about them)."""

from __future__ import annotations

from unit.watcher.watcher_builders import job, workload_for

from services.watcher import objects as objects_module
from services.watcher.objects import ClusterObjects


def test_a_deleted_object_is_remembered_as_gone() -> None:
    objects = ClusterObjects("c1")
    wl = workload_for(job(), uid="wl-1")
    objects.put("workload", wl)
    assert not objects.gone("wl-1")
    objects.remove("workload", wl.metadata.namespace, wl.metadata.name)
    assert objects.gone("wl-1") and not objects.gone("") and not objects.gone("other")


def test_a_namesake_replacing_an_object_buries_the_old_uid_only() -> None:
    objects = ClusterObjects("c1")
    objects.put("job", job(uid="first", rv="10"))
    objects.put("job", job(uid="first", rv="11"))  # the same incarnation, newer
    assert not objects.gone("first")
    objects.put("job", job(uid="second", rv="12"))  # deleted and created again (the DELETED event missed)
    assert objects.gone("first") and not objects.gone("second")


def test_a_relist_buries_what_vanished(monkeypatch) -> None:
    monkeypatch.setattr(objects_module, "GONE_MEMORY", 2)
    objects = ClusterObjects("c1")
    jobs = [job(name=f"j{i}", uid=f"u{i}") for i in range(4)]
    for j in jobs:
        objects.put("job", j)
    objects.replace_all("job", [])
    # bounded: the oldest burials are forgotten (then a command about them asks the server)
    assert [objects.gone(f"u{i}") for i in range(4)] == [False, False, True, True]
