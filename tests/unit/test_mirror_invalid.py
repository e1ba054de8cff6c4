"""Found by the hostile-input fuzzing: one undecodable object in the mirror (a MultiKueueCluster with
`locationType: "1.5.3"`, stored by an API server with nothing in front) made MirrorView.typed_items
raise, and gc died on its next sweep. Now such an object is skipped, with the error naming the field."""

from __future__ import annotations

import msgspec

from kq import subjects
from kq.mirror import MirrorView, record_headers
from kq.subjects import ObjectKey


def _put(view: MirrorView, name: str, rv: str, location_type: str) -> None:
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": location_type, "location": "w1"}}}}
    view.apply(subjects.object_subject("m", "multikueuecluster", None, name), record_headers("put", rv, f"u-{name}"),
               msgspec.json.encode(body))


def test_an_object_that_does_not_decode_is_skipped_and_named() -> None:
    heard: list[tuple[ObjectKey, str]] = []
    view = MirrorView(on_invalid=lambda key, why: heard.append((key, why)))
    _put(view, "good", "1", "Secret")
    _put(view, "bad", "2", "1.5.3")
    assert [o.metadata.name for o in view.typed_items("m", "multikueuecluster")] == ["good"]
    view.typed_items("m", "multikueuecluster")  # asked again: heard of once per resourceVersion
    bad = ObjectKey("m", "multikueuecluster", "", "bad")
    assert view.typed(bad) is None
    assert "$.spec.clusterSource.kubeConfig.locationType" in view.invalid[bad]
    assert [k for k, _ in heard] == [bad]
    _put(view, "bad", "3", "Path")  # fixed by its owner: decodes again
    assert view.typed(bad) is not None and bad not in view.invalid
