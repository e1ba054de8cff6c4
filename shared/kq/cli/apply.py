"""kq apply / create / delete: user files into the cluster's API, as kubectl does.

Every document of every file is read and checked first (kq.api.load_documents); one
bad document means nothing is sent. Then objects are sent in the order written:
apply creates what is missing and merge-patches what exists; create posts (so
generateName works); delete removes with background cascading, like kubectl.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

import msgspec

from kq.api import InputError, KindInfo, LoadedObject, kind_info, load_documents
from kq.kube import AlreadyExists, KubeClient, KubeError, NotFound

_EXTENSIONS = (".yaml", ".yml", ".json")


class Source(NamedTuple):
    name: str
    text: str


class UsageError(ValueError):
    """The command line or the files it names are wrong (nothing was sent)."""


def read_sources(paths: Sequence[str], stdin: IO[str] | None = None) -> list[Source]:
    """Files, directories (their .yaml/.yml/.json files, sorted, not recursive) or "-" for stdin."""
    if not paths:
        raise UsageError("must specify -f FILE (a file, a directory or - for stdin)")
    out: list[Source] = []
    for p in paths:
        if p == "-":
            out.append(Source("<stdin>", (stdin or sys.stdin).read()))
            continue
        path = Path(p)
        if path.is_dir():
            files = sorted(f for f in path.iterdir() if f.is_file() and f.suffix in _EXTENSIONS)
            if not files:
                raise UsageError(f"{p}: no .yaml, .yml or .json files in this directory")
        elif path.is_file():
            files = [path]
        else:
            raise UsageError(f"the path {p!r} does not exist")
        for f in files:
            try:
                out.append(Source(str(f), f.read_text()))
            except (OSError, UnicodeDecodeError) as e:
                raise UsageError(f"{f}: cannot read: {e}") from None
    return out


def _with_namespace(obj: LoadedObject, namespace: str) -> LoadedObject:
    body = dict(obj.body)
    body["metadata"] = {**body.get("metadata", {}), "namespace": namespace}
    meta = msgspec.structs.replace(obj.obj.metadata, namespace=namespace)
    return msgspec.structs.replace(obj, body=body, obj=msgspec.structs.replace(obj.obj, metadata=meta))


def load_sources(sources: Sequence[Source], *, namespace: str | None, verb: str) -> list[LoadedObject]:
    """Check every document of every source; raises InputError / UsageError before anything is sent.

    `namespace` is -n: objects without one get it, objects with another one are refused
    (as kubectl does); without -n they go to "default".
    """
    objs: list[LoadedObject] = []
    for src in sources:
        loaded = load_documents(src.text, src.name)
        if not loaded:
            raise UsageError(f"{src.name}: no objects in this file")
        for obj in loaded:
            where = f"{src.name} (document {obj.index}, {obj.ref()})"
            if obj.kind_info.namespaced:
                if not obj.namespace:
                    obj = _with_namespace(obj, namespace or "default")
                elif namespace and obj.namespace != namespace:
                    raise UsageError(f"{where}: the namespace from the provided object {obj.namespace!r} does "
                                     f"not match the namespace {namespace!r}; pass --namespace={obj.namespace}")
            if not obj.name and verb != "create":
                if obj.obj.metadata.generate_name:
                    raise UsageError(f"{where}: cannot use generateName with {verb} (use kq create)")
                raise UsageError(f"{where}: metadata.name: required")
            objs.append(obj)
    return objs


def resource_ref(info: KindInfo) -> str:
    """kubectl's name for a kind in messages: "job.batch", "clusterqueue.kueue.x-k8s.io", "namespace"."""
    return f"{info.kind.lower()}.{info.group}" if info.group else info.kind.lower()


def _plural_ref(info: KindInfo) -> str:
    return f"{info.plural}.{info.group}" if info.group else info.plural


class Reporter:
    """Where results go: kubectl's success lines on stdout, errors on stderr; counts failures."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self.out, self.err = out, err
        self.failures = 0

    def ok(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def failed(self, e: KubeError, action: str, source: str) -> None:
        self.failures += 1
        reason = e.reason or type(e).__name__
        print(f'Error from server ({reason}): error when {action} "{source}": {server_message(e)}',
              file=self.err, flush=True)


def server_message(e: KubeError) -> str:
    """The API server's own message, without the request and status code kq.kube puts in front."""
    m = _KUBE_ERROR.match(str(e))
    return m.group(1) if m and m.group(1) else str(e)


_KUBE_ERROR = re.compile(r"^[A-Z]+ \S+: \d+ (?:[A-Z][A-Za-z]* )?(.*)$", re.S)


class _Meta(msgspec.Struct, frozen=True):
    name: str = ""


class _Named(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


_named_decoder = msgspec.json.Decoder(_Named)


def _name(raw: bytes) -> str:
    """The name of an object the API server returned (generateName: the one it made up)."""
    return _named_decoder.decode(raw).metadata.name


def _spec_only(body: dict[str, Any]) -> dict[str, Any]:
    """What apply sends: everything but status (the status subresource ignores it anyway)."""
    return {k: v for k, v in body.items() if k != "status"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: what the API server will make of `target` (pure)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


async def apply_objects(client: KubeClient, objs: Sequence[LoadedObject], report: Reporter) -> None:
    """Create what is missing; merge-patch what differs; leave alone what the patch would not change
    (decided here, as kubectl does, so a concurrent status write cannot make it look "configured")."""
    for obj in objs:
        info, ns = obj.kind_info, obj.namespace or None
        ref = f"{resource_ref(info)}/{obj.name}"
        patch = _spec_only(obj.body)
        try:
            current = await client.get(info.token, ns, obj.name)
            if current is None:
                try:
                    await client.create(info.token, ns, obj.body)
                    report.ok(f"{ref} created")
                    continue
                except AlreadyExists:
                    current = await client.get(info.token, ns, obj.name)  # created meanwhile: patch it
                    if current is None:
                        raise
            live = msgspec.json.decode(current)
            if merge_patch(live, patch) == live:
                report.ok(f"{ref} unchanged")
                continue
            await client.patch(info.token, ns, obj.name, patch, patch_type="merge")
            report.ok(f"{ref} configured")
        except KubeError as e:
            report.failed(e, "applying", obj.source)


async def create_objects(client: KubeClient, objs: Sequence[LoadedObject], report: Reporter) -> None:
    for obj in objs:
        info = obj.kind_info
        try:
            created = await client.create(info.token, obj.namespace or None, obj.body)
            report.ok(f"{resource_ref(info)}/{_name(created)} created")
        except KubeError as e:
            report.failed(e, "creating", obj.source)


async def delete_objects(client: KubeClient, objs: Sequence[LoadedObject], report: Reporter) -> None:
    for obj in objs:
        await delete_named(client, obj.kind_info, obj.namespace or None, obj.name, report, obj.source)


async def delete_named(client: KubeClient, info: KindInfo, namespace: str | None, name: str, report: Reporter,
                       source: str = "") -> None:
    try:
        await client.delete(info.token, namespace if info.namespaced else None, name, propagation="Background")
        report.ok(f'{resource_ref(info)} "{name}" deleted')
    except NotFound:
        report.failures += 1
        print(f'Error from server (NotFound): {_plural_ref(info)} "{name}" not found', file=report.err, flush=True)
    except KubeError as e:
        report.failed(e, "deleting", source or name)


def kind_or_usage(kind: str) -> KindInfo:
    try:
        return kind_info(kind)
    except LookupError:
        raise UsageError(f'the server doesn\'t have a resource type "{kind}"') from None


__all__ = [
    "InputError",
    "Reporter",
    "Source",
    "UsageError",
    "apply_objects",
    "create_objects",
    "delete_named",
    "delete_objects",
    "kind_or_usage",
    "load_sources",
    "read_sources",
    "resource_ref",
]
