"""A thin async Kubernetes client: kq.kube_target reads the kubeconfig; kq.http1 carries requests
and watches (a fraction of aiohttp's CPU each), aiohttp anything through a proxy.

Bodies travel as raw JSON bytes (decoded by the caller with msgspec into the
kq.api types), never through kubernetes-asyncio's generated models. Requests go
straight to one aiohttp session with keep-alive connections: kubernetes-asyncio's
ApiClient re-serialised every body with json and, with trust_env, read ~/.netrc
and the proxy environment on every request (in a thread), which dominated the
watcher's CPU. The proxy environment is read once, when the client is made. Every
HTTP failure becomes one of the typed errors below, so callers decide on data
(`Conflict` -> re-read, `Gone` -> re-list, `Throttled` -> wait) rather than on
status codes.

Watches are read line by line from the chunked response ourselves instead of
through kubernetes-asyncio's Watch helper, whose wire behaviour is awkward: it
retries a 410 once and then raises, gives up silently on a cut stream
(`aiohttp.ClientPayloadError`) and hands a non-JSON line over as a plain
string. Here a cut stream raises `StreamBroken`, an ERROR event raises its
typed error (`Gone` for 410), and a malformed line raises `ProtocolError`.
"""

from __future__ import annotations

import builtins
import re
import ssl
import urllib.request
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

import aiohttp
import msgspec
from aiolimiter import AsyncLimiter
from yarl import URL

from kq.api.registry import kind_info
from kq.http1 import Http1Pool, HttpError, Stream
from kq.kube_target import KubeTarget, target_from_dict, target_from_file
from kq.kubeconfigs import KubeconfigError

PatchType = Literal["merge", "json", "strategic"]
Propagation = Literal["Background", "Foreground", "Orphan"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_LIST_PAGE = 500
_USER_AGENT = "kq"
# MultiKueue's clients for worker clusters (dispatcher, gc) say who they are, so a partition of
# "the manager from a worker" can be simulated without cutting the worker's own control plane.
REMOTE_USER_AGENT = "kq-multikueue"
_encoder = msgspec.json.Encoder()
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9.:\[\]/_-]*(\?[A-Za-z0-9._%&=+-]*)?")


# --- typed errors ------------------------------------------------------------------------------


class KubeError(Exception):
    """An API call failed. `status` is the HTTP code (0 when there was no answer)."""

    status: int = 0

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.reason = reason


class BadRequest(KubeError):
    """400/415/422: the request itself is wrong; retrying will not help."""


class Forbidden(KubeError):
    """401/403."""


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    """409 on a stale resourceVersion or failed precondition: re-read and re-decide."""

    status = 409


class AlreadyExists(Conflict):
    """409 AlreadyExists on create."""


class Gone(KubeError):
    """410: the resourceVersion is too old (watch) or a continue token expired (list): re-list."""

    status = 410


class Throttled(KubeError):
    """429: wait `retry_after` seconds."""

    status = 429

    def __init__(self, message: str, *, status: int | None = None, reason: str = "", retry_after: float = 1.0) -> None:
        super().__init__(message, status=status, reason=reason)
        self.retry_after = retry_after


def retry_delay(error: KubeError, backoff: float) -> float:
    """Seconds to wait before trying again after `error`: the caller's own back-off, or longer when
    the server asked for it (a 429's Retry-After). Each caller keeps its loop (a re-list, a requeue,
    a nak with delay); a retry decorator (tenacity, backoff) would not fit those shapes."""
    return max(error.retry_after, backoff) if isinstance(error, Throttled) else backoff


class ServerError(KubeError):
    """5xx: transient on the server side."""


class Unreachable(KubeError):
    """No answer: connection refused, reset or timed out."""


class StreamBroken(Unreachable):
    """A watch stream was cut mid-way; resume from the last resourceVersion seen."""


class ProtocolError(KubeError):
    """The server answered something that is not the Kubernetes wire format."""


# --- wire shapes -------------------------------------------------------------------------------


class _Status(msgspec.Struct, frozen=True):
    code: int = 0
    reason: str = ""
    message: str = ""


class _ListMeta(msgspec.Struct, frozen=True, rename="camel"):
    resource_version: str = ""
    # `continue` is a Python keyword; the JSON name is set explicitly.
    continue_: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct, frozen=True):
    metadata: _ListMeta = _ListMeta()
    items: list[msgspec.Raw] | None = None


class _WatchLine(msgspec.Struct, frozen=True):
    type: str
    object: msgspec.Raw


WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
_WATCH_TYPES = frozenset(("ADDED", "MODIFIED", "DELETED", "BOOKMARK"))


class WatchEvent(msgspec.Struct, frozen=True):
    """One watch event; `raw` is the object's JSON (for BOOKMARK only metadata.resourceVersion matters)."""

    type: WatchEventType
    raw: bytes


_status_decoder = msgspec.json.Decoder(_Status)
_list_decoder = msgspec.json.Decoder(_List)
_line_decoder = msgspec.json.Decoder(_WatchLine)


def _error_for(status: int, body: bytes, headers: Mapping[str, str] | None = None, what: str = "") -> KubeError:
    try:
        st = _status_decoder.decode(body) if body else _Status()
    except (msgspec.DecodeError, msgspec.ValidationError):
        st = _Status(message=body[:200].decode("utf-8", "replace"))
    code = st.code or status
    msg = f"{what}: {code} {st.reason} {st.message}".strip()
    if code == 404:
        return NotFound(msg, reason=st.reason)
    if code == 409:
        cls = AlreadyExists if st.reason == "AlreadyExists" else Conflict
        return cls(msg, reason=st.reason)
    if code == 410:
        return Gone(msg, reason=st.reason)
    if code == 429:
        retry = 1.0
        if headers is not None:
            try:
                retry = float(headers.get("Retry-After", "1"))
            except ValueError:
                retry = 1.0
        return Throttled(msg, status=429, reason=st.reason, retry_after=retry)
    if code in (401, 403):
        return Forbidden(msg, status=code, reason=st.reason)
    if code >= 500:
        return ServerError(msg, status=code, reason=st.reason)
    return BadRequest(msg, status=code, reason=st.reason)


def _body(body: bytes | msgspec.Struct | Mapping[str, Any] | list[Any]) -> bytes:
    """The JSON bytes of a request body (bytes are sent as given)."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    return _encoder.encode(body)


def _ssl_context(target: KubeTarget) -> ssl.SSLContext | bool:
    """TLS as kubernetes-asyncio sets it up from the kubeconfig; none for a plain-HTTP server (loading
    the system's CA bundle costs ~0.3 s of CPU per client, and MultiKueue makes one per worker)."""
    if not target.host.lower().startswith("https:"):
        return True  # aiohttp's default: nothing built unless an https URL is ever asked for
    ctx = ssl.create_default_context(cafile=target.ca_file)
    if target.cert_file:
        ctx.load_cert_chain(target.cert_file, keyfile=target.key_file)
    if not target.verify_tls:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _env_proxy(host: str) -> str | None:
    """The proxy the environment names for this server (read once, not per request)."""
    parts = urlsplit(host)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme or "http")


def _direct_pool(host: str, tls_context: ssl.SSLContext | bool, request_kw: Mapping[str, Any],
                 limit: int, pipeline: int = 1) -> tuple[Http1Pool | None, str, bytes]:
    """kq.http1's pool for this server, the server's base path and the Host header line; no pool
    when requests go through a proxy or the server is not plain http/https."""
    parts = urlsplit(host)
    if "proxy" in request_kw or parts.scheme not in ("http", "https") or not parts.hostname:
        return None, "", b""
    tls: ssl.SSLContext | None = None
    if parts.scheme == "https":
        tls = tls_context if isinstance(tls_context, ssl.SSLContext) else ssl.create_default_context()
    port = parts.port or (443 if tls is not None else 80)
    netloc = parts.netloc.rpartition("@")[2]
    pool = Http1Pool(parts.hostname, port, tls=tls, server_hostname=request_kw.get("server_hostname"), limit=limit,
                     pipeline=pipeline)
    return pool, parts.path.rstrip("/"), f"Host: {netloc}\r\n".encode("idna")


def resource_path(kind: str, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
    """The API path of a kind (kq.api.registry's names), below the server's base path."""
    info = kind_info(kind)
    base = f"/api/{info.version}" if not info.group else f"/apis/{info.group}/{info.version}"
    if info.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    elif not info.namespaced and namespace:
        raise ValueError(f"{kind} is cluster-scoped; namespace {namespace!r} given")
    path = f"{base}/{info.plural}"
    if name is not None:
        if not name:
            raise ValueError(f"{kind}: empty name")
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


class KubeClient:
    """One API server. Methods take the lower-case kind names of kq.api.registry."""

    def __init__(self, target: KubeTarget, *, request_timeout_s: float = 30.0, max_connections: int = 128,
                 user_agent: str = _USER_AGENT, pipeline: int = 1, rate: tuple[float, int] | None = None) -> None:
        """Call from a running event loop (the session binds to it). `pipeline` > 1: unary requests
        made in the same turn of the event loop go out pipelined, up to that many on one connection
        (kq.http1.Http1Pool; not through a proxy). `rate` (requests a second, burst): every request,
        a watch's too, waits for its turn, as client-go's token bucket has it (Kueue's
        `clientConnection`); None: no client-side limit."""
        # A leaky bucket of `burst` drained at `qps` lets the same requests through as client-go's
        # token bucket of `burst` filled at `qps`.
        self._limiter = AsyncLimiter(rate[1], rate[1] / rate[0]) if rate is not None else None
        self._refresh = target.refresh
        self._user_agent = user_agent
        self._host = target.host.rstrip("/")
        self._timeout_s = request_timeout_s
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s)
        tls = _ssl_context(target)
        connector = aiohttp.TCPConnector(limit=max_connections, ssl=tls)
        # No cookie jar (the API server sets none; the jar's filter ran per request); big objects in watches.
        self._session = aiohttp.ClientSession(connector=connector, read_bufsize=2**21,
                                              cookie_jar=aiohttp.DummyCookieJar())
        # What every request passes to aiohttp besides headers and body, built once.
        self._request_kw: dict[str, Any] = {}
        if proxy := target.proxy or _env_proxy(self._host):
            self._request_kw["proxy"] = proxy
        if target.tls_server_name:
            self._request_kw["server_hostname"] = target.tls_server_name
        # Headers per content type while the token cannot change (no refresh hook: exec plugins and
        # token files have one); aiohttp copies them, so one dict serves every request.
        self._authorization = target.authorization
        self._fixed_headers: dict[str, dict[str, str]] | None = None if target.refresh else {}
        # Unary requests on kq.http1 (a fraction of aiohttp's CPU per request); watches, and every
        # request through a proxy, on aiohttp.
        self._pool, self._base_path, self._host_line = _direct_pool(self._host, tls, self._request_kw,
                                                                     max_connections, pipeline)
        self._heads: dict[str, bytes] = {}

    @classmethod
    async def from_kubeconfig(
        cls, path: str, *, context: str | None = None, request_timeout_s: float = 30.0, max_connections: int = 128,
        user_agent: str = _USER_AGENT, pipeline: int = 1, rate: tuple[float, int] | None = None,
    ) -> KubeClient:
        """max_connections bounds concurrent HTTP connections, for requests and for watches apart
        (each open watch holds one). A user with a `tokenFile` (a ServiceAccount's projected token)
        is re-read whenever the file changes."""
        return cls(await target_from_file(path, context), request_timeout_s=request_timeout_s,
                   max_connections=max_connections, user_agent=user_agent, pipeline=pipeline, rate=rate)

    @classmethod
    async def from_kubeconfig_dict(
        cls, config: Mapping[str, Any], *, request_timeout_s: float = 10.0, max_connections: int = 16,
        user_agent: str = _USER_AGENT,
    ) -> KubeClient:
        """From a kubeconfig already parsed (a MultiKueue Secret's content). Raises ValueError when it
        does not describe a usable cluster; the message never contains the kubeconfig's secrets."""
        try:
            target = await target_from_dict(config)
        except KubeconfigError as e:  # says what is wrong, never a secret
            raise ValueError(f"invalid kubeconfig: {e}") from None
        except Exception as e:  # kubernetes-asyncio's own (a plugin user) or a malformed entry: KeyError, TypeError ...
            raise ValueError(f"invalid kubeconfig: {type(e).__name__}") from None
        return cls(target, request_timeout_s=request_timeout_s, max_connections=max_connections, user_agent=user_agent)

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        await self._session.close()

    async def _headers(self, content_type: str) -> dict[str, str]:
        fixed = self._fixed_headers
        if fixed is not None and (headers := fixed.get(content_type)) is not None:
            return headers
        headers = {"Accept": "application/json", "Content-Type": content_type, "User-Agent": self._user_agent}
        # Asked per request when an exec/refresh hook in the kubeconfig may renew the token.
        token = await self._refresh() if self._refresh is not None else self._authorization
        if token:
            headers["authorization"] = token
        if fixed is not None:
            fixed[content_type] = headers
        return headers

    # --- paths ---

    _path = staticmethod(resource_path)

    # --- one request ---

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        what = f"{method} {path}"
        url = self._host + path
        if query:
            url += "?" + urlencode(query)
        # A URL of plain characters (names are DNS labels; the query is urlencoded) is taken as
        # it is, not parsed and re-quoted by yarl on every request.
        target: str | URL = URL(url, encoded=True) if _PLAIN_URL.fullmatch(url) else url
        headers = await self._headers(content_type)
        if self._limiter is not None:
            await self._limiter.acquire()
        try:
            resp = await self._session.request(method, target, headers=headers, data=body,
                                               timeout=timeout or self._timeout, **self._request_kw)
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise Unreachable(f"{what}: {type(e).__name__}: {e}") from e
        if 200 <= resp.status < 300:
            return resp
        try:
            data = await resp.read()
        except (TimeoutError, aiohttp.ClientError) as e:
            raise Unreachable(f"{what}: {resp.status} and the body was cut: {e}") from e
        finally:
            resp.release()
        raise _error_for(resp.status, data, resp.headers, what)

    async def _head(self, content_type: str) -> bytes:
        """The request's header lines for kq.http1 (cached like the headers themselves)."""
        if (head := self._heads.get(content_type)) is not None:
            return head
        headers = await self._headers(content_type)
        head = self._host_line + "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
        if self._fixed_headers is not None:
            self._heads[content_type] = head
        return head

    async def _read(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
                    body: bytes | None = None, content_type: str = "application/json") -> bytes:
        if self._pool is not None:
            target = self._base_path + path
            if query:
                target += "?" + urlencode(query)
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                resp = await self._pool.request(method, target, await self._head(content_type), body, self._timeout_s)
            except HttpError as e:
                raise Unreachable(f"{method} {path}: {e}") from e
            if 200 <= resp.status < 300:
                return resp.body
            raise _error_for(resp.status, resp.body, resp.headers, f"{method} {path}")
        return await self._read_aiohttp(method, path, query=query, body=body, content_type=content_type)

    async def _read_aiohttp(self, method: str, path: str, **kw: Any) -> bytes:
        resp = await self._call(method, path, **kw)
        try:
            return await resp.read()
        except (TimeoutError, aiohttp.ClientError) as e:
            raise Unreachable(f"{method} {path}: body cut: {e}") from e
        finally:
            resp.release()

    # --- verbs ---

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[bytes], str]:
        """Every object (raw JSON each) and the list's resourceVersion, paging with limit/continue."""
        path = self._path(kind, namespace)
        items: list[bytes] = []
        rv = ""
        cont = ""
        while True:
            query = [("limit", str(_LIST_PAGE))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if cont:
                query.append(("continue", cont))
            data = await self._read("GET", path, query=query)
            try:
                page = _list_decoder.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise ProtocolError(f"GET {path}: not a list: {e}") from e
            if not rv:
                rv = page.metadata.resource_version
            items.extend(bytes(r) for r in page.items or ())
            cont = page.metadata.continue_
            if not cont:
                return items, rv

    async def get(self, kind: str, namespace: str | None, name: str) -> bytes | None:
        try:
            return await self._read("GET", self._path(kind, namespace, name))
        except NotFound:
            return None

    async def create(self, kind: str, namespace: str | None, body: bytes | msgspec.Struct | Mapping[str, Any]) -> bytes:
        return await self._read("POST", self._path(kind, namespace), body=_body(body))

    async def replace(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        body: bytes | msgspec.Struct | Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> bytes:
        """PUT: the body's metadata.resourceVersion is the precondition (409 when stale)."""
        return await self._read("PUT", self._path(kind, namespace, name, subresource), body=_body(body))

    async def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        body: bytes | msgspec.Struct | Mapping[str, Any] | builtins.list[Any],
        *,
        patch_type: PatchType,
        subresource: str | None = None,
    ) -> bytes:
        """PATCH with an explicit content type (a dict body would otherwise go out as a JSON patch)."""
        ctype = _PATCH_CONTENT_TYPES[patch_type]
        return await self._read(
            "PATCH", self._path(kind, namespace, name, subresource), body=_body(body), content_type=ctype
        )

    async def delete(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        propagation: Propagation = "Background",
        preconditions: Mapping[str, str] | None = None,
    ) -> None:
        """Delete; `preconditions` may hold uid and/or resourceVersion (409 when they do not match)."""
        opts: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if preconditions:
            opts["preconditions"] = dict(preconditions)
        await self._read("DELETE", self._path(kind, namespace, name), body=_body(opts))

    async def watch(
        self,
        kind: str,
        resource_version: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        bookmarks: bool = True,
        timeout_s: float = 300.0,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after `resource_version` until the server ends the watch (clean end: iteration stops).

        Raises Gone (resume point too old: re-list), StreamBroken (cut mid-stream: resume from the
        last resourceVersion seen), ProtocolError (garbage on the wire) or the typed error of an
        ERROR event.
        """
        path = self._path(kind, namespace)
        query = [("watch", "true"), ("resourceVersion", resource_version), ("timeoutSeconds", str(int(timeout_s)))]
        if bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if label_selector:
            query.append(("labelSelector", label_selector))
        if self._pool is not None:  # kq.http1: the body read in blocks of whole lines
            stream = await self._open_stream(path, query)
            try:
                blocks = stream.blocks(timeout_s + 30.0)
                while True:
                    try:
                        block = await anext(blocks, None)
                    except (TimeoutError, OSError) as e:
                        raise StreamBroken(f"watch {path}: {type(e).__name__}: {e}") from e
                    except ValueError as e:  # a line beyond the stream's limit, or not HTTP
                        raise ProtocolError(f"watch {path}: {e}") from e
                    if block is None:
                        return
                    for line in block.split(b"\n"):
                        if line and not line.isspace():
                            yield _event(line, path)
            finally:
                stream.close()
        # No total timeout: the server ends the watch after timeoutSeconds; guard only against silence.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=timeout_s + 30.0)
        resp = await self._call("GET", path, query=query, timeout=timeout)
        try:
            while True:
                try:
                    line = await resp.content.readline()
                except (TimeoutError, aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as e:
                    raise StreamBroken(f"watch {path}: {type(e).__name__}: {e}") from e
                except ValueError as e:  # a line beyond aiohttp's buffer limit
                    raise ProtocolError(f"watch {path}: {e}") from e
                if not line:
                    return
                if line.isspace():
                    continue
                yield _event(line, path)
        finally:
            resp.close()


    async def _open_stream(self, path: str, query: builtins.list[tuple[str, str]]) -> Stream:
        """A watch's answer on kq.http1 (a connection of its own), its status checked."""
        assert self._pool is not None
        target = self._base_path + path + "?" + urlencode(query)
        if self._limiter is not None:
            await self._limiter.acquire()
        try:
            stream = await self._pool.stream("GET", target, await self._head("application/json"), self._timeout_s)
        except HttpError as e:
            raise Unreachable(f"GET {path}: {e}") from e
        if 200 <= stream.status < 300:
            return stream
        try:
            body = await stream.read(self._timeout_s)
        except (TimeoutError, OSError, ValueError) as e:
            raise Unreachable(f"GET {path}: {stream.status} and the body was cut: {e}") from e
        finally:
            stream.close()
        raise _error_for(stream.status, body, stream.headers, f"GET {path}")


def _event(line: bytes, path: str) -> WatchEvent:
    try:
        ev = _line_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ProtocolError(f"watch {path}: not a watch event ({e}): {line[:200]!r}") from e
    if ev.type == "ERROR":
        raw = bytes(ev.object)
        try:
            code = _status_decoder.decode(raw).code
        except (msgspec.DecodeError, msgspec.ValidationError):
            code = 500
        raise _error_for(code or 500, raw, None, f"watch {path}")
    if ev.type not in _WATCH_TYPES:
        raise ProtocolError(f"watch {path}: unknown event type {ev.type!r}")
    return WatchEvent(ev.type, bytes(ev.object))  # type: ignore[arg-type]  # a str checked against _WATCH_TYPES above
