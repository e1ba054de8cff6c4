"""kq.kube's reading of the wire: every watch line and error answer becomes a typed value or error."""

from __future__ import annotations

import pytest

from kq import kube
from kq.kube import WatchEvent


@pytest.mark.parametrize(
    "line,want",
    [
        pytest.param(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n',
                     WatchEvent("ADDED", b'{"metadata":{"name":"a"}}'), id="added"),
        pytest.param(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}',
                     WatchEvent("BOOKMARK", b'{"metadata":{"resourceVersion":"9"}}'), id="bookmark"),
        pytest.param(b'{"object":{"a":1},"type":"DELETED"}', WatchEvent("DELETED", b'{"a":1}'), id="field-order-free"),
    ],
)
def test_watch_lines(line: bytes, want: WatchEvent) -> None:
    assert kube._event(line, "/x") == want


@pytest.mark.parametrize(
    "line,error",
    [
        pytest.param(b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}',
                     kube.Gone, id="error-410-is-gone"),
        pytest.param(b'{"type":"ERROR","object":{"kind":"Status","code":500,"message":"boom"}}',
                     kube.ServerError, id="error-500"),
        pytest.param(b'{"type":"ERROR","object":"not a status"}', kube.ServerError, id="error-garbled-status"),
        pytest.param(b"<html>proxy error</html>", kube.ProtocolError, id="not-json"),
        pytest.param(b'{"type":"ADDED"}', kube.ProtocolError, id="no-object"),
        pytest.param(b'{"type":"SURPRISE","object":{}}', kube.ProtocolError, id="unknown-type"),
    ],
)
def test_watch_lines_that_are_errors(line: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        kube._event(line, "/x")


@pytest.mark.parametrize(
    "status,body,headers,error,extra",
    [
        pytest.param(404, b'{"kind":"Status","code":404,"reason":"NotFound"}', None, kube.NotFound, {}, id="404"),
        pytest.param(409, b'{"code":409,"reason":"Conflict"}', None, kube.Conflict, {}, id="409-conflict"),
        pytest.param(409, b'{"code":409,"reason":"AlreadyExists"}', None, kube.AlreadyExists, {}, id="409-exists"),
        pytest.param(410, b'{"code":410,"reason":"Expired"}', None, kube.Gone, {}, id="410"),
        pytest.param(429, b'{"code":429}', {"Retry-After": "3"}, kube.Throttled, {"retry_after": 3.0}, id="429"),
        pytest.param(503, b"upstream down", None, kube.ServerError, {"status": 503}, id="503-plain-text"),
        pytest.param(422, b'{"code":422,"reason":"Invalid"}', None, kube.BadRequest, {"status": 422}, id="422"),
        pytest.param(415, b'{"code":415}', None, kube.BadRequest, {"status": 415}, id="415"),
        pytest.param(403, b"{}", None, kube.Forbidden, {"status": 403}, id="403"),
    ],
)
def test_error_answers(status: int, body: bytes, headers: dict | None, error: type[kube.KubeError],
                       extra: dict) -> None:
    e = kube._error_for(status, body, headers, "GET /x")
    assert type(e) is error
    for attr, value in extra.items():
        assert getattr(e, attr) == value
    assert "GET /x" in str(e)
