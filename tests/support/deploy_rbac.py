"""What deploy/ grants each ServiceAccount: (apiGroup, resource, verb, namespace) tuples, namespace
"*" for a ClusterRole bound cluster-wide. Read from the manifests kustomization.yaml lists."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
Grant = tuple[str, str, str, str]  # (group, resource, verb, namespace or "*")


@functools.cache  # the CRDs alone take a second to parse
def manifests() -> tuple[dict[str, Any], ...]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    return tuple(d for rel in kustomization["resources"] for d in yaml.safe_load_all((DEPLOY / rel).read_text()) if d)


@functools.cache
def grants(account: str, namespace: str = "kq-system") -> frozenset[Grant]:
    docs = manifests()
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    out: set[Grant] = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == account and s.get("namespace") == namespace
                   for s in b.get("subjects", ())):
            continue
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
        where = b["metadata"].get("namespace", "*") if b["kind"] == "RoleBinding" else "*"
        for rule in role["rules"]:
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((g, r, v, where))
    return frozenset(out)


def token_mounted(account: str) -> bool:
    return any(d["kind"] == "ServiceAccount" and d["metadata"]["name"] == account
               and d.get("automountServiceAccountToken") for d in manifests())
