"""Discovery documents: /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>, /version."""

from __future__ import annotations

from typing import Any

from kubesim.resources import ResourceType, groups, in_group_version

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-kubesim",
    "gitCommit": "kubesim",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g, vs) for g, vs in groups().items()]}


def api_group(name: str) -> dict[str, Any] | None:
    vs = groups().get(name)
    if vs is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, vs)}


def _resource(r: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": _VERBS,
    }
    if r.short_names:
        main["shortNames"] = list(r.short_names)
    if r.categories:
        main["categories"] = list(r.categories)
    out = [main]
    if r.status:
        out.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                    "kind": r.kind, "verbs": ["get", "patch", "update"]})
    for sub in r.extra_subresources:
        out.append({"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                    "kind": "Binding", "verbs": ["create"]})
    return out


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    rts = in_group_version(group, version)
    if not rts:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [doc for r in rts for doc in _resource(r)],
    }
