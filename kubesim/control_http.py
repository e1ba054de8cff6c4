"""The control API under /kubesim/: scenario hooks and faults, outside the cluster prefixes.

    GET    /kubesim/state                       {"clusters": {c: {resourceVersion, msSinceLastChange,
                                                                  pendingTimers, ...}}}
    GET    /kubesim/clusters/{c}/kubeconfig     the cluster's kubeconfig (YAML)
    POST   /kubesim/clusters/{c}/finish         {"namespace", "name", "succeeded": true|false}
    POST   /kubesim/clusters/{c}/pods           {"namespace", "name", "ready": bool} | {..., "neverReady": true}
    POST   /kubesim/clusters/{c}/disconnect     the cluster's API drops every connection, open watches too
    POST   /kubesim/clusters/{c}/reconnect
    POST   /kubesim/clusters/{c}/faults         {"type": "cut-watches", "midStream": bool}
                                                {"type": "expire-history"}
                                                {"type": "errors", "code": 409|429|500|503, "count": N,
                                                 "verbs": [...], "resources": [...], "retryAfterSeconds": 1}
                                                {"type": "latency", "ms": N}
    DELETE /kubesim/clusters/{c}/faults         clears errors and latency
    POST   /kubesim/clusters/{c}/tokens         {"tokens": {token: user}}: only these bearer tokens are let in
                                                (401 otherwise); {"tokens": null}: no checks (the default)
    GET    /kubesim/clusters/{c}/requests       {"requests": [[user, group, resource, verb, namespace], ...]}:
                                                every distinct call so far (kubesim/authn.py)

Errors answer {"error": message} with 400 (bad body, naming the field), 404 or 409.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from aiohttp import web

from kubesim import hooks
from kubesim.cluster import Cluster
from kubesim.faults import FaultError

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class ControlError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_encode(body), status=status, content_type="application/json")


class ControlApi:
    def __init__(self, clusters: Mapping[str, Cluster], kubeconfig: Callable[[str], str]) -> None:
        self._clusters = clusters
        self._kubeconfig = kubeconfig
        self._by_op = self._ops()

    def _ops(self) -> dict[str, dict[str, Callable[[Cluster, Any], Any]]]:
        """/kubesim/clusters/{c}/<op>: method -> handler."""
        return {
            "kubeconfig": {"GET": self.kubeconfig},
            "finish": {"POST": self.finish},
            "pods": {"POST": self.pods},
            "disconnect": {"POST": self.disconnect},
            "reconnect": {"POST": self.reconnect},
            "faults": {"POST": self.add_fault, "DELETE": self.clear_faults},
            "tokens": {"POST": self.set_tokens},
            "requests": {"GET": self.requests},
        }

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Route a request under /kubesim/ (kubesim serves without aiohttp's router: see server.py)."""
        parts = request.path.strip("/").split("/")
        if parts == ["kubesim", "state"]:
            if request.method != "GET":
                return web.Response(status=405, text="405: Method Not Allowed")
            return await self.state(request)
        if len(parts) == 4 and parts[:2] == ["kubesim", "clusters"] and parts[3] in self._by_op:
            fn = self._by_op[parts[3]].get(request.method)
            if fn is None:
                return web.Response(status=405, text="405: Method Not Allowed")
            return await self._call(fn, parts[2], request)
        return web.Response(status=404, text="404: Not Found")

    async def _call(self, fn: Callable[[Cluster, Any], Any], name: str,
                    request: web.BaseRequest) -> web.StreamResponse:
        try:
            cluster = self._clusters.get(name)
            if cluster is None:
                raise ControlError(404, f"no cluster {name!r}; have {sorted(self._clusters)}")
            body: Any = None
            if request.method == "POST":
                data = await request.read()
                try:
                    body = _decode(data) if data else {}
                except msgspec.DecodeError as e:
                    raise ControlError(400, f"body: not JSON: {e}") from None
                if not isinstance(body, dict):
                    raise ControlError(400, "body: must be a JSON object")
            result = fn(cluster, body)
            if isinstance(result, web.StreamResponse):
                return result
            return _answer(result)
        except ControlError as e:
            return _answer({"error": e.message}, e.code)
        except hooks.HookError as e:
            return _answer({"error": e.message}, e.code)
        except FaultError as e:
            return _answer({"error": str(e)}, 400)

    async def state(self, request: web.BaseRequest) -> web.Response:
        return _answer({"clusters": {name: c.state() for name, c in sorted(self._clusters.items())}})

    def kubeconfig(self, cluster: Cluster, body: Any) -> web.Response:
        return web.Response(text=self._kubeconfig(cluster.name), content_type="application/yaml")

    def finish(self, cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
        ns, name = _target(body)
        succeeded = body.get("succeeded", True)
        if not isinstance(succeeded, bool):
            raise ControlError(400, f"succeeded: want true or false, got {succeeded!r}")
        return hooks.finish(self._clusters, cluster.name, ns, name, succeeded)

    def pods(self, cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
        ns, name = _target(body)
        ready, never = body.get("ready"), body.get("neverReady", False)
        if ready is not None and not isinstance(ready, bool):
            raise ControlError(400, f"ready: want true or false, got {ready!r}")
        if not isinstance(never, bool):
            raise ControlError(400, f"neverReady: want true or false, got {never!r}")
        if never and ready:
            raise ControlError(400, "ready: cannot be true together with neverReady")
        return hooks.set_readiness(self._clusters, cluster.name, ns, name, ready=ready, never_ready=never)

    def disconnect(self, cluster: Cluster, body: Any) -> dict[str, Any]:
        """Body {} cuts every client; {"userAgentPrefix": p} only clients whose User-Agent starts with p."""
        prefix = body.get("userAgentPrefix") if isinstance(body, dict) else None
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise ControlError(400, f"userAgentPrefix: want a non-empty string, got {prefix!r}")
        if prefix is None:
            cluster.disconnected = True
            cut = cluster.store.hub.cut_all("disconnect")
        else:
            cluster.disconnected_agent = prefix
            cut = cluster.store.hub.cut_all("disconnect", prefix)
        return {"cluster": cluster.name, "disconnected": True, "userAgentPrefix": prefix, "watchesCut": cut}

    def reconnect(self, cluster: Cluster, body: Any) -> dict[str, Any]:
        cluster.disconnected = False
        cluster.disconnected_agent = None
        return {"cluster": cluster.name, "disconnected": False}

    def add_fault(self, cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
        kind = body.get("type")
        if kind == "cut-watches":
            mid = body.get("midStream", False)
            if not isinstance(mid, bool):
                raise ControlError(400, f"midStream: want true or false, got {mid!r}")
            return {"cluster": cluster.name, "watchesCut": cluster.store.hub.cut_all("cut-mid" if mid else "cut")}
        if kind == "expire-history":
            cluster.store.hub.expire(cluster.store.rv)
            return {"cluster": cluster.name, "historyFrom": str(cluster.store.rv)}
        if kind == "errors":
            cluster.faults.add_errors(body)
        elif kind == "latency":
            cluster.faults.set_latency(body)
        else:
            raise ControlError(400, f"type: want cut-watches, expire-history, errors or latency, got {kind!r}")
        return {"cluster": cluster.name, "faults": cluster.faults.describe()}

    def set_tokens(self, cluster: Cluster, body: dict[str, Any]) -> dict[str, Any]:
        tokens = body.get("tokens")
        if tokens is not None and (not isinstance(tokens, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) and v for k, v in tokens.items())):
            raise ControlError(400, f"tokens: want a map of token to user name, or null, got {tokens!r}")
        cluster.authn.set_tokens(tokens)
        return {"cluster": cluster.name, "users": sorted(set((tokens or {}).values()))}

    def requests(self, cluster: Cluster, body: Any) -> dict[str, Any]:
        return {"cluster": cluster.name, "requests": sorted(cluster.authn.requests)}

    def clear_faults(self, cluster: Cluster, body: Any) -> dict[str, Any]:
        cluster.faults.clear()
        return {"cluster": cluster.name, "faults": cluster.faults.describe()}


def _target(body: dict[str, Any]) -> tuple[str, str]:
    ns, name = body.get("namespace"), body.get("name")
    if not isinstance(ns, str) or not ns:
        raise ControlError(400, f"namespace: want a non-empty string, got {ns!r}")
    if not isinstance(name, str) or not name:
        raise ControlError(400, f"name: want a non-empty string, got {name!r}")
    return ns, name
