"""The Kueue CRDs' conversion webhook (`kq conversion-webhook`): the API server stores v1beta2 and asks
here, over HTTPS, for v1beta1 when a client reads or writes v1beta1 (kq.api.convert_back).

    POST /convert   apiextensions.k8s.io/v1 ConversionReview in, ConversionReview out
    GET  /livez /readyz

Like the dashboard it needs no Kubernetes client: the API server calls it. TLS comes from files (a
Secret mounted into the pod, e.g. by cert-manager); without them it serves plain HTTP, for tests only.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from aiohttp import web

from kq.api.convert import ConversionError
from kq.api.convert_back import conversion_review

_decoder = msgspec.json.Decoder(dict[str, Any])
_encoder = msgspec.json.Encoder()


async def _convert(req: web.Request) -> web.Response:
    try:
        review = _decoder.decode(await req.read())
        answer = conversion_review(review)
    except (msgspec.DecodeError, ConversionError) as e:
        return web.Response(status=400, text=f"not a ConversionReview: {e}")
    return web.Response(body=_encoder.encode(answer), content_type="application/json")


async def _ok(_req: web.Request) -> web.Response:
    return web.Response(text="ok")


def conversion_app() -> web.Application:
    app = web.Application(client_max_size=32 * 1024 * 1024)  # a list conversion can carry many objects
    app.router.add_post("/convert", _convert)
    app.router.add_get("/livez", _ok)
    app.router.add_get("/readyz", _ok)
    return app


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


@asynccontextmanager
async def serving(host: str, port: int, tls: ssl.SSLContext | None) -> AsyncIterator[int]:
    """Serve until the block ends; yields the bound port (0 picks a free one)."""
    runner = web.AppRunner(conversion_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or ()  # aiohttp keeps the bound sockets there
    try:
        yield sockets[0].getsockname()[1] if sockets else port
    finally:
        await runner.cleanup()
