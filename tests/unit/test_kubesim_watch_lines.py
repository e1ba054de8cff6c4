"""kubesim's watch fan-out: an event's line is made once for every watcher that sees it as it is,
and a selector's watcher still gets its own view (a MODIFIED that starts matching is ADDED)."""

from __future__ import annotations

import json

from kubesim.watch import MODIFIED, Event, Watcher


def _event() -> Event:
    prev = {"metadata": {"name": "a", "labels": {}}}
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}}
    return Event(2, "configmaps", "ns", MODIFIED, obj, prev, json.dumps(obj).encode(), json.dumps(prev).encode())


def test_one_line_for_every_watcher_that_sees_the_event_as_it_is() -> None:
    ev = _event()
    plain = [Watcher("configmaps", None, None, 100) for _ in range(3)]
    labelled = Watcher("configmaps", "ns", lambda o: o["metadata"]["labels"].get("x") == "1", 100)
    for w in [*plain, labelled]:
        w.offer(ev)
    lines = [w.buf[0] for w in plain]
    assert lines[0] is lines[1] is lines[2]
    assert json.loads(lines[0])["type"] == "MODIFIED"
    assert json.loads(labelled.buf[0])["type"] == "ADDED"
    assert json.loads(labelled.buf[0])["object"]["metadata"]["labels"] == {"x": "1"}
