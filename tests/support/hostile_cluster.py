"""Hostile objects written straight into the cluster, where the watcher meets it (no `kq apply`
in front), and what must hold afterwards. Used by tests/e2e/test_secure_bus.py, whose stack
takes the flood before it runs its Job: so the Job also shows nobody stopped processing.

kubesim refuses some (metadata rules, as an API server does); the rest reach the watcher, the
mirror and the services. Then: no process has died or failed a loop (no traceback in any log),
what a service could not use was dead-lettered with an error naming the field, and every stored
object kq cannot decode carries, on its status or in a Warning Event, a message naming the field
(services/watcher/invalid.py).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import msgspec
import nats.errors
from hypothesis import HealthCheck, given, settings

from kq import subjects
from kq.api.registry import kind_for
from kq.kube import KubeClient, KubeError
from kq.runtime.errors import dead_letter_decoder
from kq.stack import Stack
from services.watcher.core.invalid import INVALID_SPEC, STATUS_CONDITION, decode_or_error
from support.hostile import BASES, CASES, EXAMPLES, KINDS, cohort_cycle, hostile
from support.wait import eventually

PER_KIND = max(4, EXAMPLES // 6)  # each case is an API write and a mirror record: fewer than through apply
# A dead letter names the field: a msgspec path ($.spec.x), a field path (spec.x, metadata.x) or a quoted field.
NAMES_A_FIELD = re.compile(r"\$\.|\b(spec|metadata|status|value|description)\b|`[^`]+`")


def _draw(kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    @settings(max_examples=PER_KIND, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(hostile(kind, body_only=True))
    def collect(doc: dict[str, Any]) -> None:
        out.append(doc)

    collect()
    return out


def _unique(doc: dict[str, Any], i: int) -> tuple[str | None, dict[str, Any]]:
    """Give an object that kept its base name a name of its own; its namespace (None: cluster-scoped)."""
    meta = doc.get("metadata")
    base_meta = BASES[doc.get("kind", "")]["metadata"] if doc.get("kind") in BASES else {}
    if isinstance(meta, dict) and meta.get("name") == base_meta.get("name"):
        meta["name"] = f"{meta['name']}-h{i}"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) and ns else ("default" if "namespace" in base_meta else None), doc


async def flood(client: KubeClient) -> int:
    """Write every hostile object (and a cohort cycle); returns how many the API server stored."""
    docs = [doc for kind in KINDS for doc in _draw(kind)] + cohort_cycle(("cyc-a", "cyc-b", "cyc-c"))
    stored = refused = 0
    for i, doc in enumerate(docs):
        kind = str(doc.get("kind"))
        CASES[f"into kubesim {kind}"] += 1
        ns, body = _unique(doc, i)
        try:
            info = kind_for(str(doc.get("apiVersion")), kind)
        except Exception:  # a mutated apiVersion/kind: the API server has no such resource
            refused += 1
            continue
        try:
            await client.create(info.kind, ns if info.namespaced else None, msgspec.json.encode(body))
            stored += 1
        except KubeError:
            refused += 1
    CASES["into kubesim: stored by the API server"] = stored
    CASES["into kubesim: refused by the API server"] = refused
    return stored


async def dead_letters(stack: Stack) -> list[Any]:
    letters = []
    sub = await stack.bus.js.subscribe(subjects.DEAD_LETTERS_ALL, ordered_consumer=True)
    try:
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                letters.append(dead_letter_decoder.decode((await sub.next_msg(timeout=1.0)).data))
    finally:
        await sub.unsubscribe()
    return letters


async def check_after_flood(stack: Stack, services: tuple[str, ...]) -> None:
    for svc in services:
        child = stack.process(svc)
        assert child is not None and child.exit_code() is None, f"{svc} died: {stack.log_path(svc)}"
    letters = await dead_letters(stack)
    CASES["into kubesim: dead-lettered by a service"] = len(letters)
    vague = [f"{d.service}: {d.error}" for d in letters if not NAMES_A_FIELD.search(d.error)]
    assert not vague, "dead letters that name no field:\n" + "\n".join(vague[:10])
    # No loop of any process (kubesim's controllers included) failed on what it met.
    for name in (*services, "kubesim"):
        text = stack.log_path(name).read_text(errors="replace")
        assert "Traceback" not in text, f"{name} failed on hostile input:\n{text[text.index('Traceback'):][:3000]}"


def _field(error: str) -> str:
    """The field an error from core/invalid.py names (its text before the first ": ")."""
    field, sep, _ = error.partition(": ")
    assert sep and field and NAMES_A_FIELD.search(error), f"an error that names no field: {error}"
    return field


async def _undecodable(client: KubeClient) -> list[tuple[str, str, str, dict[str, Any], str]]:
    """(kind, namespace, name, object, the field it fails at) for every stored object kq cannot read."""
    out = []
    for kind in KINDS:
        info = kind_for(BASES[kind]["apiVersion"], kind)
        items, _ = await client.list(info.kind, None)
        for raw in items:
            _obj, error = decode_or_error(info.token, raw)
            if error is not None:
                body = msgspec.json.decode(raw)
                out.append((info.token, body["metadata"].get("namespace", ""), body["metadata"]["name"], body,
                            _field(error)))
    return out


async def said_on_objects(client: KubeClient) -> int:
    """Each undecodable object says so, naming the field: kq's condition on its status, or a Warning
    Event. Returns how many objects (bounded poll: the watcher writes after it meets them)."""

    async def probe() -> int:
        events, _ = await client.list("Event", None)
        evented = {(e["involvedObject"].get("name"), e["involvedObject"].get("kind", "").lower()): e["message"]
                   for e in map(msgspec.json.decode, events) if e.get("reason") == INVALID_SPEC}
        bad = await _undecodable(client)
        for kind, ns, name, body, field in bad:
            if kind in STATUS_CONDITION:
                type_, reason = STATUS_CONDITION[kind]
                conditions = body.get("status", {}).get("conditions", ())
                said = next((c.get("message", "") for c in conditions if isinstance(c, dict)
                             and c.get("type") == type_ and c.get("reason") == reason), None)
                if said is None and kind == "workload":  # holding quota: an Event instead
                    said = evented.get((name, kind))
            else:
                said = evented.get((name, kind))
            assert said is not None, f"nothing said on {kind} {ns}/{name} (fails at {field})"
            assert field in said, f"{kind} {name}: {said!r} does not name {field}"
        return len(bad)

    return await eventually(probe, timeout=60, interval=0.5, what="every undecodable object said so")
