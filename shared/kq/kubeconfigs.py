"""MultiKueue worker kubeconfigs: parsing and validation (pure; the reading is kq.remote_clusters).

Only the dispatcher and gc use these. Error messages name where a kubeconfig came from and
what is wrong with it, never its content.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import yaml

from kq.api import constants as k
from kq.api.core import Secret


class KubeconfigError(ValueError):
    """Why a kubeconfig cannot be used (safe to show: no secret material)."""


def kubeconfig_from_text(text: str, where: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise KubeconfigError(f"{where}: not valid YAML") from None
    if not isinstance(doc, dict) or not doc.get("clusters") or not doc.get("contexts"):
        raise KubeconfigError(f"{where}: not a kubeconfig (needs clusters and contexts)")
    for c in doc.get("users") or ():
        user = (c or {}).get("user") or {}
        if "exec" in user or "auth-provider" in user:  # as Kueue's validateKubeconfig
            raise KubeconfigError(f"{where}: exec and auth-provider users are not allowed")
    return doc


def kubeconfig_from_secret(secret: Secret | None, name: str, namespace: str) -> dict[str, Any]:
    """The kubeconfig under the `kubeconfig` key of a Secret (data base64, or stringData)."""
    where = f"Secret {namespace}/{name}"
    if secret is None:
        raise KubeconfigError(f"{where} not found")
    key = k.MULTIKUEUE_CONFIG_SECRET_KEY
    if key in secret.data:
        try:
            text = base64.b64decode(secret.data[key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise KubeconfigError(f"{where}: key {key!r} is not base64 text") from None
    elif key in secret.string_data:
        text = secret.string_data[key]
    else:
        raise KubeconfigError(f"{where} has no key {key!r}")
    return kubeconfig_from_text(text, where)
