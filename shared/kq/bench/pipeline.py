"""HTTP/1.1 pipelining for the bench driver: a batch of requests written at once on one keep-alive
connection, the answers read back in order (RFC 9112, section 9.3.2).

The driver creates the k-th workload of every queue at the same moment (1,000 at once in
large-scale) and finishes together the workloads admitted together. One request per connection
at a time cost the API server (kubesim, on the same cores as kq) a read and a write system call
per request, and the driver a wake-up, a timer and a future per request. A batch costs about one
of each. kubesim answers a batch it reads at once with one write (kubesim/fast_http.py).

Only for a plain-http server reached without a proxy (kubesim): `for_kubeconfig` answers None
otherwise and the driver sends one request at a time through kq.kube. Answers are (status, body);
the requests a failed or timed-out connection left unanswered get status 0 (they may or may not
have landed), for the caller to retry one at a time.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

import httptools
import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import load_kube_config

NO_ANSWER = 0
_USER_AGENT = "kq"


class Answer(NamedTuple):
    status: int  # NO_ANSWER when the connection gave none
    body: bytes


class _Conn(asyncio.Protocol):
    """One connection: a batch written at once, its answers parsed by httptools as they come."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.usable = True  # open, and every answer so far allowed keeping it
        self._parser = httptools.HttpResponseParser(self)
        self._answers: list[Answer] = []
        self._want = 0
        self._done: asyncio.Future[None] | None = None
        self._body: list[bytes] = []

    def send(self, data: bytes, count: int) -> asyncio.Future[None]:
        assert self.transport is not None
        self._answers, self._want, self._body = [], count, []
        self._done = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self._done

    def answers(self) -> list[Answer]:
        return self._answers

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.close()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self.close()
            self._end()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self._end()

    # httptools callbacks
    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        body, self._body = b"".join(self._body), []
        if 100 <= status < 200:
            return  # an interim answer: the real one follows
        self._answers.append(Answer(status, body))
        if not self._parser.should_keep_alive():
            self.close()
        if len(self._answers) >= self._want:
            self._end()

    def _end(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)


def _token_only(kubeconfig: str) -> bool:
    """Whether the current context's user is at most a fixed bearer token."""
    doc = yaml.safe_load(Path(kubeconfig).read_text()) or {}
    current = doc.get("current-context")
    ctx = next((c.get("context") or {} for c in doc.get("contexts") or () if c.get("name") == current), {})
    user = next((u.get("user") or {} for u in doc.get("users") or () if u.get("name") == ctx.get("user")), {})
    return set(user) <= {"token"}


class Pipeline:
    """Up to `connections` connections to one server, each carrying batches of up to `batch` requests."""

    def __init__(self, host: str, port: int, base_path: str, head: bytes, *, connections: int = 4,
                 batch: int = 64, timeout_s: float = 30.0) -> None:
        self._host, self._port = host, port
        self._base = base_path
        self._head = head  # header lines shared by every request, each ending in CRLF
        self._batch = batch
        self._timeout_s = timeout_s
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[_Conn] = []

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
        return b"".join((
            f"{method} {self._base}{path} HTTP/1.1\r\n".encode(), self._head,
            b"Content-Type: ", content_type.encode(), b"\r\nContent-Length: %d\r\n\r\n" % len(body), body,
        ))

    async def send(self, requests: list[bytes]) -> list[Answer]:
        """The answers to `requests`, in order; NO_ANSWER for those no answer came to."""
        chunks = [requests[i:i + self._batch] for i in range(0, len(requests), self._batch)]
        parts = await asyncio.gather(*(self._send_one(c) for c in chunks))
        return [a for part in parts for a in part]

    async def _send_one(self, requests: list[bytes]) -> list[Answer]:
        async with self._slots:
            conn = self._take()
            try:
                if conn is None:
                    _, conn = await asyncio.get_running_loop().create_connection(_Conn, self._host, self._port)
                async with asyncio.timeout(self._timeout_s):
                    await conn.send(b"".join(requests), len(requests))
            except (OSError, TimeoutError):
                if conn is not None:
                    conn.close()
            got = conn.answers() if conn is not None else []
            if conn is not None and conn.usable and len(got) == len(requests):
                self._idle.append(conn)
            elif conn is not None:
                conn.close()
            return got + [Answer(NO_ANSWER, b"")] * (len(requests) - len(got))

    def _take(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
        return None

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
