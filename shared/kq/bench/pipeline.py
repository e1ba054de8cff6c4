"""HTTP/1.1 pipelining for the bench driver: a batch of requests written at once on one keep-alive
connection, the answers read back in order (RFC 9112, section 9.3.2).

The driver creates the k-th workload of every queue at the same moment (1,000 at once in
large-scale) and finishes together the workloads admitted together. One request per connection
at a time cost the API server (kubesim, on the same cores as kq) a read and a write system call
per request, and the driver a wake-up, a timer and a future per request. A batch costs about one
of each. kubesim answers a batch it reads at once with one write (kubesim/fast_http.py). The
connections are kq.http1's (`Http1Pool.request_batch`).

Only for a plain-http server reached without a proxy (kubesim): `for_kubeconfig` answers None
otherwise and the driver sends one request at a time through kq.kube. Answers are (status, body);
the requests a failed or timed-out connection left unanswered get status 0 (they may or may not
have landed), for the caller to retry one at a time.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import load_kube_config

from kq.http1 import Http1Pool, Response

NO_ANSWER = 0
_USER_AGENT = "kq"


class Answer(NamedTuple):
    status: int  # NO_ANSWER when the connection gave none
    body: bytes


def _token_only(kubeconfig: str) -> bool:
    """Whether the current context's user is at most a fixed bearer token."""
    doc = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    current = doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or () if c.get("name") == current), {})
    user = next((u.get("user") or {} for u in doc.get("users") or () if u.get("name") == ctx.get("user")), {})
    return set(user) <= {"token"}


class Pipeline:
    """Up to `connections` connections to one server (kq.http1), each carrying batches of up to
    `batch` requests."""

    def __init__(self, host: str, port: int, base_path: str, head: bytes, *, connections: int = 4,
                 batch: int = 64, timeout_s: float = 30.0) -> None:
        self._base = base_path
        self._head = head  # header lines shared by every request, each ending in CRLF
        self._batch = batch
        self._timeout_s = timeout_s
        self._pool = Http1Pool(host, port, tls=None, server_hostname=None, limit=connections)

    @classmethod
    async def for_kubeconfig(cls, path: str, **kw: int | float) -> Pipeline | None:
        """For the kubeconfig's current cluster, or None when it is not plain http without a proxy or
        its user is more than a fixed token (a token file, an exec plugin, certificates)."""
        cfg = Configuration()
        await load_kube_config(config_file=path, client_configuration=cfg, persist_config=False)
        parts = urlsplit(cfg.host)
        if (parts.scheme != "http" or not parts.hostname or cfg.proxy or cfg.refresh_api_key_hook
                or not _token_only(path)
                or (not urllib.request.proxy_bypass(parts.hostname) and urllib.request.getproxies().get("http"))):
            return None
        token = await cfg.get_api_key_with_prefix("BearerToken")
        head = f"Host: {parts.netloc.rpartition('@')[2]}\r\nAccept: application/json\r\nUser-Agent: {_USER_AGENT}\r\n"
        if token:
            head += f"authorization: {token}\r\n"
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"), head.encode("latin-1"),
                   **kw)  # type: ignore[arg-type]

    def request(self, method: str, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        """One request's bytes (`path` below the server's base path, as kq.kube's)."""
        return Http1Pool.encode(method, self._base + path, self._head + b"Content-Type: " + content_type.encode()
                                + b"\r\n", body)

    async def send(self, requests: list[bytes]) -> list[Answer]:
        """The answers to `requests`, in order; NO_ANSWER for those no answer came to."""
        outs = await self._pool.request_batch(requests, self._timeout_s, batch=self._batch)
        return [Answer(o.status, o.body) if isinstance(o, Response) else Answer(NO_ANSWER, b"") for o in outs]

    def close(self) -> None:
        self._pool.close()
