"""The Kubernetes REST and watch protocol over aiohttp, one path prefix per cluster.

    /clusters/<cluster>/api[/v1[/...]]            core group
    /clusters/<cluster>/apis[/<group>[/<version>[/...]]]
    /clusters/<cluster>/version, /healthz, /livez, /readyz

Resource paths are the API server's: [namespaces/<ns>/]<plural>[/<name>[/status|/binding]].
Faults of the cluster (disconnect, latency, injected errors) apply here, before dispatch.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec
import yaml
from aiohttp import web

from kubesim import discovery
from kubesim.cluster import Cluster
from kubesim.errors import ApiError, bad_request, conflict, method_not_allowed, success
from kubesim.resources import PODS, ResourceType, lookup
from kubesim.selectors import matcher, parse_field_selector, parse_label_selector
from kubesim.watch_http import OpenWatch, ResponseSink, WatchSink, open_watch, stream_watch

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
_TRUE = ("true", "1")
_JSON_TYPES = ("application/json", "")
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")


class Target(NamedTuple):  # one per request: a tuple is built in a fraction of a frozen dataclass's time
    rt: ResourceType
    ns: str | None  # None: a namespaced resource across all namespaces; "" for cluster-scoped
    name: str | None
    sub: str | None


def _json(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json", headers=headers)


def error_response(e: ApiError) -> web.Response:
    return _json(_encode(e.status()), e.code, e.headers)


def _not_found_path(path: str) -> ApiError:
    return ApiError(404, f"the server could not find the requested resource ({path})")


def parse_target(segs: list[str], path: str) -> Target | dict[str, Any] | str:
    """A resource target, or a discovery document, or a plain-text answer."""
    if segs[0] == "api":
        if len(segs) == 1:
            return "api"
        group, version, rest = "", segs[1], segs[2:]
    elif segs[0] == "apis":
        if len(segs) == 1:
            return discovery.api_group_list()
        if len(segs) == 2:
            doc = discovery.api_group(segs[1])
            if doc is None:
                raise _not_found_path(path)
            return doc
        group, version, rest = segs[1], segs[2], segs[3:]
    elif segs == ["version"]:
        return discovery.VERSION_INFO
    elif len(segs) == 1 and segs[0] in ("healthz", "livez", "readyz"):
        return "ok"
    else:
        raise _not_found_path(path)
    if not rest:
        doc = discovery.api_resource_list(group, version)
        if doc is None:
            raise _not_found_path(path)
        return doc
    ns: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        ns, rest = rest[1], rest[2:]
    rt = lookup(group, version, rest[0])
    if rt is None or len(rest) > 3 or "" in rest or (ns is not None and not rt.namespaced):
        raise _not_found_path(path)
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and not ((sub == "status" and rt.status) or sub in rt.extra_subresources):
        raise _not_found_path(path)
    if rt.namespaced and name is not None and ns is None:
        raise _not_found_path(path)
    return Target(rt, ns if rt.namespaced else "", name, sub)


def verb_of(method: str, t: Target, query: Mapping[str, str]) -> str:
    if method == "GET":
        if t.name is not None:
            return "get"
        return "watch" if query.get("watch", "").lower() in _TRUE else "list"
    if method == "POST":
        if t.name is None or t.sub in t.rt.extra_subresources:
            return "create"
    elif method == "PUT" and t.name is not None:
        return "update"
    elif method == "PATCH" and t.name is not None:
        return "patch"
    elif method == "DELETE":
        return "delete" if t.name is not None else "deletecollection"
    raise method_not_allowed()


class ApiServer:
    def __init__(self, clusters: Mapping[str, Cluster], *, bookmark_interval_s: float,
                 watch_flush_s: float = 0.0) -> None:
        self._clusters = clusters
        self._bookmark_s = bookmark_interval_s
        self._flush_s = watch_flush_s
        self.server_address = "127.0.0.1"

    async def handle(self, request: web.BaseRequest, cluster_name: str, tail: str) -> web.StreamResponse:
        """A request to /clusters/<cluster_name>/<tail>."""
        cluster = self._clusters.get(cluster_name)
        if cluster is None:
            return error_response(_not_found_path(request.path))
        if (cluster.disconnected or cluster.disconnected_agent is not None) and cluster.cut_off(
                request.headers.get("User-Agent", "")):
            return _drop(request)
        if cluster.faults.latency_ms:
            await asyncio.sleep(cluster.faults.latency_ms / 1000)
            if cluster.cut_off(request.headers.get("User-Agent", "")):
                return _drop(request)
        try:
            user = cluster.authn.user(request.headers)
            parsed = parse_target(tail.strip("/").split("/"), request.path)
            if isinstance(parsed, str):
                if parsed == "api":
                    return _json(_encode(discovery.api_versions(self.server_address)))
                return web.Response(text=parsed)
            if isinstance(parsed, dict):
                return _json(_encode(parsed))
            verb = verb_of(request.method, parsed, request.query)
            self.admit(cluster, user, parsed, verb)
            if verb == "watch":
                opened = open_watch(cluster, parsed.rt, parsed.ns, request.query, request.headers.get("User-Agent", ""))
                sink = ResponseSink(request)
                await self.stream_watch(sink, cluster, opened)
                return sink.resp
            data = await request.read()
            status, body = self.plain(cluster, parsed, verb, request.query, request.headers.get("Content-Type"), data)
            return _json(body, status)
        except ApiError as e:
            return error_response(e)

    async def stream_watch(self, sink: WatchSink, cluster: Cluster, opened: OpenWatch) -> None:
        """The answer of a watch opened by kubesim.watch_http.open_watch (also kubesim/fast_http.py's)."""
        await stream_watch(sink, cluster, opened, bookmark_s=self._bookmark_s, flush_s=self._flush_s)

    def admit(self, cluster: Cluster, user: str, t: Target, verb: str) -> None:
        """Log the call (kubesim/authn.py) and answer an injected error fault, if one matches."""
        resource = f"{t.rt.plural}/{t.sub}" if t.sub else t.rt.plural
        cluster.authn.record(user, t.rt.group, resource, verb, t.ns or "")
        fault = cluster.faults.errors and cluster.faults.take_error(verb, (
            t.rt.plural, t.rt.key, *((resource,) if t.sub else ())))
        if fault:
            headers = {"Retry-After": str(fault.retry_after_s)} if fault.code == 429 else None
            raise ApiError(fault.code, f"kubesim injected fault: {fault.code} on {verb} {t.rt.key}", headers=headers)

    def plain(self, cluster: Cluster, t: Target, verb: str, q: Mapping[str, str], ctype: str | None,
              data: bytes) -> tuple[int, bytes]:
        """Every verb but watch, synchronously: (status, JSON body). Also kubesim/fast_http.py's."""
        store, rt = cluster.store, t.rt
        if q.get("dryRun"):
            raise bad_request("kubesim does not support dryRun")
        if verb == "get":
            return 200, store.get(rt, t.ns or "", t.name or "").raw
        if verb == "list":
            return 200, self._list(cluster, t, q)
        if verb == "create":
            body = _body(data, ctype)
            if t.sub == "binding":
                return 201, self._bind(cluster, t, body)
            return 201, store.create(rt, t.ns or "", body).raw
        if verb == "update":
            body = _body(data, ctype)
            return 200, store.replace(rt, t.ns or "", t.name or "", body, status_only=t.sub == "status").raw
        if verb == "patch":
            return 200, store.patch(rt, t.ns or "", t.name or "", ctype or "", data, status_only=t.sub == "status").raw
        if verb == "delete":
            opts = _delete_options(data, q)
            entry, gone = store.delete(rt, t.ns or "", t.name or "", **opts)
            if gone and not (rt.custom or rt is PODS):
                return 200, _encode(success(rt, t.name or "", entry.obj["metadata"]["uid"]))
            return 200, entry.raw
        # deletecollection
        opts = _delete_options(data, q)
        match = matcher(parse_label_selector(q.get("labelSelector")), parse_field_selector(q.get("fieldSelector"), rt))
        items = []
        for e in store.list(rt, t.ns, match):
            m = e.obj["metadata"]
            items.append(store.delete(rt, m.get("namespace", ""), m["name"], **opts)[0].raw)
        return 200, _list_body(rt, {"resourceVersion": str(store.rv)}, items)

    def _bind(self, cluster: Cluster, t: Target, body: Any) -> bytes:
        node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not node:
            raise bad_request("binding: target.name is required")
        pod = cluster.store.get(PODS, t.ns or "", t.name or "")
        current = pod.obj.get("spec", {}).get("nodeName")
        if current:
            raise conflict(PODS, t.name or "", f"pod {t.name} is already assigned to node \"{current}\"")
        cluster.store.modify(PODS, t.ns or "", t.name or "", lambda p: p["spec"].__setitem__("nodeName", node))
        return _encode({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})

    # --- list ---

    def _list(self, cluster: Cluster, t: Target, q: Mapping[str, str]) -> bytes:
        store, rt = cluster.store, t.rt
        match = matcher(parse_label_selector(q.get("labelSelector")), parse_field_selector(q.get("fieldSelector"), rt))
        entries = store.list(rt, t.ns, match)
        rv = store.rv
        token = q.get("continue")
        if token:
            rv, start = _decode_continue(token)
            entries = [
                e for e in entries if (e.obj["metadata"].get("namespace", ""), e.obj["metadata"]["name"]) > start
            ]
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise bad_request(f"limit: not an integer: {q.get('limit')!r}") from None
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and len(entries) > limit:
            last = entries[limit - 1].obj["metadata"]
            meta["continue"] = _encode_continue(rv, (last.get("namespace", ""), last["name"]))
            meta["remainingItemCount"] = len(entries) - limit
            entries = entries[:limit]
        return _list_body(rt, meta, [e.raw for e in entries])


def _drop(request: web.BaseRequest, resp: web.StreamResponse | None = None) -> web.StreamResponse:
    """Cut the connection without an answer (a partitioned or crashed API server)."""
    if request.transport is not None:
        request.transport.abort()
    return resp if resp is not None else web.Response(status=503)


def _list_body(rt: ResourceType, meta: dict[str, Any], items: list[bytes]) -> bytes:
    return b"".join((
        b'{"kind":"', rt.list_kind.encode(), b'","apiVersion":"', rt.api_version.encode(),
        b'","metadata":', _encode(meta), b',"items":[', b",".join(items), b"]}",
    ))


def _encode_continue(rv: int, start: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(_encode({"rv": rv, "start": list(start)})).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        d = _decode(base64.urlsafe_b64decode(token.encode()))
        return int(d["rv"]), (str(d["start"][0]), str(d["start"][1]))
    except (binascii.Error, msgspec.DecodeError, KeyError, IndexError, TypeError, ValueError):
        raise bad_request(f"continue: invalid continue token {token[:40]!r}") from None


def _body(data: bytes, content_type: str | None) -> Any:
    if not data:
        raise bad_request("the request body is empty")
    ctype = (content_type if content_type is not None else "application/json").split(";", 1)[0].strip().lower()
    if ctype not in _JSON_TYPES + _YAML_TYPES:
        raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                            f"application/json, application/yaml (got {ctype!r})")
    try:
        if ctype in _YAML_TYPES:
            return yaml.safe_load(data)
        return _decode(data)
    except (msgspec.DecodeError, yaml.YAMLError) as e:
        raise bad_request(f"error decoding request body: {e}") from None


def _delete_options(data: bytes, q: Mapping[str, str]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if data:
        try:
            body = _decode(data)
        except msgspec.DecodeError as e:
            raise bad_request(f"error decoding DeleteOptions: {e}") from None
        if isinstance(body, dict):
            if body.get("propagationPolicy"):
                opts["propagation"] = body["propagationPolicy"]
            elif body.get("orphanDependents") is not None:
                opts["propagation"] = "Orphan" if body["orphanDependents"] else "Background"
            if isinstance(body.get("preconditions"), dict):
                opts["preconditions"] = body["preconditions"]
            if body.get("gracePeriodSeconds") is not None:
                opts["grace_seconds"] = int(body["gracePeriodSeconds"])
    if q.get("propagationPolicy"):
        opts["propagation"] = q["propagationPolicy"]
    if q.get("gracePeriodSeconds"):
        try:
            opts["grace_seconds"] = int(q["gracePeriodSeconds"])
        except ValueError:
            raise bad_request(f"gracePeriodSeconds: not an integer: {q['gracePeriodSeconds']!r}") from None
    return opts
