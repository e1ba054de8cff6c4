"""Where one API server is and how to authenticate to it, read from a kubeconfig (kq.kube's input).

kq reads the kubeconfigs it meets (kubesim's, a ServiceAccount's, MultiKueue's) itself, with
kubernetes-asyncio's rules: files of $KUBECONFIG merged (the first entry of a name wins, the last
current-context), data preferred to files, relative paths from the file that names them, `-data`
written to private temp files, `token`/`tokenFile` then username/password. Importing
kubernetes-asyncio costs ~0.4 s of CPU (it loads every API model), paid by every service and
every `kq` command; now only a user with an exec plugin or an auth-provider pays it, and that
user is read by kubernetes-asyncio itself, as before.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kq.kubeconfigs import KubeconfigError

Authorization = Callable[[], Awaitable[str | None]]


@dataclass(frozen=True, kw_only=True)
class KubeTarget:
    host: str  # the server's URL, without a trailing slash
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_tls: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    authorization: str | None = None  # the Authorization header, when it never changes
    # Asked before every request when the credential can change (a rotated tokenFile, a plugin).
    refresh: Authorization | None = None


class TokenFile:
    """A ServiceAccount's projected token is rotated (the kubelet swaps the file; the old one
    expires): re-read the file whenever it changed (a stat per request)."""

    def __init__(self, path: str, token: str | None = None) -> None:
        self.path = path
        self._token = f"Bearer {token}" if token else None
        self._seen: tuple[int, int, int] | None = None

    async def __call__(self) -> str | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return self._token  # keep the token we have: the next request says whether it still works
        seen = (st.st_ino, st.st_mtime_ns, st.st_size)
        if seen != self._seen:
            try:
                token = Path(self.path).read_text().strip()
            except OSError:
                return self._token
            if token:
                self._token, self._seen = f"Bearer {token}", seen
        return self._token


async def target_from_file(path: str, context: str | None = None) -> KubeTarget:
    """`path` may list several files (os.pathsep), as $KUBECONFIG does."""
    try:
        doc = _merged(path)
        if _needs_plugin(doc, context):
            return await _plugin_target(context, from_file=path)
        return _target(doc, context)
    except KubeconfigError as e:
        raise KubeconfigError(f"kubeconfig {path}: {e}") from None


async def target_from_dict(config: Mapping[str, Any], context: str | None = None) -> KubeTarget:
    """From a kubeconfig already parsed (relative paths are from the working directory)."""
    doc = {k: ([_Entry(e, None) for e in v or ()] if k in _LISTS else v) for k, v in config.items()}
    if _needs_plugin(doc, context):
        return await _plugin_target(context, from_dict=config)
    return _target(doc, context)


# --- reading ------------------------------------------------------------------------------------

_LISTS = ("clusters", "contexts", "users")


@dataclass(frozen=True)
class _Entry:
    value: Any  # one item of clusters/contexts/users: {name, cluster|context|user}
    base: str | None  # the folder of the file it came from


def _merged(paths: str) -> dict[str, Any]:
    out: dict[str, Any] = {k: [] for k in _LISTS}
    loaded = False
    for raw in paths.split(os.pathsep):
        path = os.path.expanduser(raw)
        if not raw or not os.path.exists(path):
            continue
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        if not isinstance(doc, dict):
            raise KubeconfigError(f"{path} is not a kubeconfig")
        loaded = True
        base = os.path.abspath(os.path.dirname(path))
        for key in _LISTS:
            names = {_name(e.value) for e in out[key]}
            out[key] += [_Entry(item, base) for item in doc.get(key) or () if _name(item) not in names]
        if "current-context" in doc:
            out["current-context"] = doc["current-context"]
    if not loaded:
        raise KubeconfigError("no such file")
    return out


def _name(item: Any) -> Any:
    return item.get("name") if isinstance(item, dict) else None


def _named(doc: Mapping[str, Any], key: str, name: Any) -> _Entry | None:
    return next((e for e in doc.get(key) or () if _name(e.value) == name), None)


def _context(doc: Mapping[str, Any], context: str | None) -> tuple[_Entry, _Entry | None]:
    """The context's cluster entry and user entry (None without a user)."""
    name = context if context is not None else doc.get("current-context")
    ctx = _named(doc, "contexts", name)
    if ctx is None or not isinstance(ctx.value.get("context"), dict):
        raise KubeconfigError(f"no context {name!r}")
    cluster = _named(doc, "clusters", ctx.value["context"].get("cluster"))
    if cluster is None or not isinstance(cluster.value.get("cluster"), dict):
        raise KubeconfigError(f"context {name!r} names no known cluster")
    user = _named(doc, "users", ctx.value["context"].get("user"))
    return cluster, user


def _user(entry: _Entry | None) -> dict[str, Any]:
    user = entry.value.get("user") if entry is not None else None
    return user if isinstance(user, dict) else {}


def _needs_plugin(doc: Mapping[str, Any], context: str | None) -> bool:
    user = _user(_context(doc, context)[1])
    return "exec" in user or "name" in (user.get("auth-provider") or {})


def _target(doc: Mapping[str, Any], context: str | None) -> KubeTarget:
    cluster_entry, user_entry = _context(doc, context)
    cluster, user = cluster_entry.value["cluster"], _user(user_entry)
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError("no server")
    host = server.rstrip("/")
    ca = cert = key = None
    if host.startswith("https"):  # as kubernetes-asyncio: TLS files only for an https server
        base = cluster_entry.base or ""
        ca = _as_file(cluster, "certificate-authority", base)
        cert = _as_file(user, "client-certificate", base)
        key = _as_file(user, "client-key", base)
    authorization, refresh = _authorization(user, user_entry.base if user_entry else None)
    return KubeTarget(
        host=host, ca_file=ca, cert_file=cert, key_file=key,
        verify_tls=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name"), proxy=cluster.get("proxy-url"),
        authorization=authorization, refresh=refresh,
    )


def _authorization(user: Mapping[str, Any], base: str | None) -> tuple[str | None, Authorization | None]:
    """A token (inline first, else tokenFile: re-read when it changes), else basic auth."""
    token_file = os.path.normpath(os.path.join(base or "", user["tokenFile"])) if user.get("tokenFile") else None
    token = user.get("token") or None
    if token is None and token_file is not None:
        try:
            token = Path(token_file).read_text() or None
        except OSError as e:
            raise KubeconfigError(f"cannot read tokenFile {token_file}: {e.strerror}") from None
    if token_file is not None:
        return None, TokenFile(token_file, token.strip() if token else None)
    if token is not None:
        return f"Bearer {token}", None
    if "username" in user and "password" in user:
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        return f"Basic {basic}", None
    return None, None


_temp_files: dict[bytes, str] = {}


def _as_file(obj: Mapping[str, Any], key: str, base: str) -> str | None:
    """The file of `key`, or `key-data` (base64, preferred) written to a private temp file."""
    if data := obj.get(f"{key}-data"):
        content = base64.standard_b64decode(data)
        if content not in _temp_files:
            if not _temp_files:
                atexit.register(_remove_temp_files)
            fd, name = tempfile.mkstemp()  # mode 0600
            with os.fdopen(fd, "wb") as f:
                f.write(content)
            _temp_files[content] = name
        return _temp_files[content]
    if not obj.get(key):
        return None
    path = os.path.normpath(os.path.join(base, obj[key]))
    if not os.path.isfile(path):
        raise KubeconfigError(f"{key} {path} does not exist")
    return path


def _remove_temp_files() -> None:
    for name in _temp_files.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _temp_files.clear()


# --- exec plugins and auth-providers: kubernetes-asyncio's own loader ---------------------------


async def _plugin_target(context: str | None, *, from_file: str | None = None,
                         from_dict: Mapping[str, Any] | None = None) -> KubeTarget:
    from kubernetes_asyncio.client import Configuration
    from kubernetes_asyncio.config import load_kube_config, load_kube_config_from_dict

    cfg = Configuration()
    if from_file is not None:
        await load_kube_config(config_file=from_file, context=context, client_configuration=cfg, persist_config=False)
    else:
        await load_kube_config_from_dict(dict(from_dict or {}), context=context, client_configuration=cfg)
    refresh: Authorization | None = None
    if cfg.refresh_api_key_hook is not None:
        async def refresh() -> str | None:
            return await cfg.get_api_key_with_prefix("BearerToken")
    return KubeTarget(host=cfg.host.rstrip("/"), ca_file=cfg.ssl_ca_cert, cert_file=cfg.cert_file,
                      key_file=cfg.key_file, verify_tls=cfg.verify_ssl, tls_server_name=cfg.tls_server_name,
                      proxy=cfg.proxy, authorization=None if refresh else cfg.api_key.get("BearerToken"),
                      refresh=refresh)
