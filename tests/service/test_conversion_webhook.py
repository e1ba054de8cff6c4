"""The CRDs' conversion webhook over HTTPS, as the API server calls it: `kq conversion-webhook` as a process
with a certificate from kq's throwaway CA (kq.stack.secure), a ConversionReview posted, v1beta1 and v1beta2 answered."""

from __future__ import annotations

import asyncio
import ssl
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kq.stack.secure import make_certificates

pytestmark = pytest.mark.timeout(60)
V1BETA1, V1BETA2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"


def review(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "0c1e", "desiredAPIVersion": desired, "objects": list(objects)}}


async def test_the_webhook_converts_both_ways_over_tls(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path, "127.0.0.1")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kq.cli", "conversion-webhook", "--host", "127.0.0.1", "--port", "0",
        "--tls-cert-file", str(cert), "--tls-key-file", str(key), stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("kq conversion webhook on https://127.0.0.1:"), line
        url = line.split()[-1]
        trust = ssl.create_default_context(cafile=str(ca))
        old_cq: dict[str, Any] = {"apiVersion": V1BETA1, "kind": "ClusterQueue", "metadata": {"name": "cq", "uid": "u1"},
                  "spec": {"cohort": "org", "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
                           "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}}
        async with aiohttp.ClientSession() as http:
            async with http.post(url, json=review(V1BETA2, old_cq), ssl=trust) as resp:
                assert resp.status == 200
                up = (await resp.json())["response"]
            assert (up["uid"], up["result"]) == ("0c1e", {"status": "Success"})
            (new_cq,) = up["convertedObjects"]
            assert (new_cq["apiVersion"], new_cq["spec"]["cohortName"]) == (V1BETA2, "org")
            assert "cohort" not in new_cq["spec"] and new_cq["metadata"] == old_cq["metadata"]
            async with http.post(url, json=review(V1BETA1, new_cq), ssl=trust) as resp:
                (back,) = (await resp.json())["response"]["convertedObjects"]
            assert back == old_cq
            bad = {**old_cq, "spec": {**old_cq["spec"], "queueingStrategy": "Sometimes"}}
            async with http.post(url, json=review(V1BETA2, bad), ssl=trust) as resp:
                refused = (await resp.json())["response"]
            assert refused["result"]["status"] == "Failure" and "queueingStrategy" in refused["result"]["message"]
            async with http.post(url, data=b"not json", ssl=trust) as resp:
                assert resp.status == 400
            with pytest.raises(aiohttp.ClientConnectorCertificateError):  # TLS for real: an untrusted CA fails
                async with http.post(url, json=review(V1BETA2, old_cq)):
                    pass
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
