"""kq.kube.retry_delay: the caller's back-off, or the server's Retry-After on a 429 when longer."""

from __future__ import annotations

import pytest

from kq import kube


@pytest.mark.parametrize(
    ("error", "backoff", "want"),
    [
        pytest.param(kube.Throttled("429", retry_after=3.0), 0.2, 3.0, id="429-asks-longer"),
        pytest.param(kube.Throttled("429", retry_after=0.0), 0.2, 0.2, id="429-asks-less"),
        pytest.param(kube.ServerError("500"), 0.5, 0.5, id="other-error-own-backoff"),
        pytest.param(kube.Unreachable("down"), 0.0, 0.0, id="no-backoff"),
    ],
)
def test_retry_delay(error: kube.KubeError, backoff: float, want: float) -> None:
    assert kube.retry_delay(error, backoff) == want
