"""The dashboard page in a real headless Chromium (Debian's chromium + chromedriver, driven by Selenium),
over a real stack: nats-server, kubesim, the watcher, the admission service and `kq dashboard`'s server.

A preemption and three pending workloads, then the page must show: the cohort tree, the ClusterQueue's
usage against its quota, the pending workloads at their visibility positions with why they wait, and
the preemption and admission among the recent decisions. KQ_WRITE_SCREENSHOT=1 also writes the
screenshot to docs/dashboard.png (the README's picture)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from service.test_admission_service import KUEUE, job_doc, running_admission, workload_of_job
from support.wait import eventually
from support.watcher_harness import create, running_watcher

from kq.config import NatsConfig
from kq.dashboard.server import serving
from kq.kube import KubeClient
from kq.runtime import Bus
from kubesim.server import KubeSim

pytestmark = pytest.mark.timeout(150)
C = "c1"
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("KQ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KQ_CHROMEDRIVER", "/usr/bin/chromedriver")
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1500,900")


def _browser_or_skip() -> tuple[str, str]:
    chromium = shutil.which(CHROMIUM) or shutil.which("chromium")
    driver = shutil.which(CHROMEDRIVER) or shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver; .ci/run does this)")
    pytest.importorskip("selenium", reason="selenium is in the test extras: pip install -e '.[test]'")
    return chromium, driver


@contextmanager
def chromium(tmp: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = _browser_or_skip()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in (*CHROME_FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}"):
        opts.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    try:
        yield browser
    finally:
        browser.quit()


def page_reading(browser: Any) -> dict[str, Any]:
    """What a person sees, read off the DOM by the data-testid attributes the page sets."""
    from selenium.webdriver.common.by import By

    out: dict[str, Any] = {"cohorts": [e.text for e in browser.find_elements(By.CSS_SELECTOR, "[data-testid=cohort]")]}
    cards = {}
    for card in browser.find_elements(By.CSS_SELECTOR, "[data-testid=cluster-queue]"):
        bars = {(b.get_attribute("data-flavor"), b.get_attribute("data-resource")):
                (float(b.get_attribute("data-used-pct") or "nan"), b.text)
                for b in card.find_elements(By.CSS_SELECTOR, "[data-testid=bar]")}
        rows = [[td.text for td in r.find_elements(By.TAG_NAME, "td")]
                for r in card.find_elements(By.CSS_SELECTOR, "[data-testid=pending-row]")]
        cards[card.get_attribute("data-name")] = {"bars": bars, "pending": rows, "text": card.text}
    out["cards"] = cards
    out["recent"] = [(d.get_attribute("data-kind"), d.get_attribute("data-name"))
                     for d in browser.find_elements(By.CSS_SELECTOR, "[data-testid=decision]")]
    return out


async def make_cohort_world(kube: KubeClient) -> None:
    await create(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "pool-a"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}})
    await create(kube, {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "research"},
                        "spec": {"parentName": "org"}})
    for cq, cpu in (("cq", "4"), ("cq-small", "1")):
        await create(kube, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {
            "namespaceSelector": {}, "cohortName": "research", "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu"],
                                "flavors": [{"name": "pool-a", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
    await create(kube, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "demo"},
                        "spec": {"clusterQueue": "cq"}})
    await create(kube, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
                        "status": {"allocatable": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                                   "capacity": {"cpu": "16", "memory": "32Gi", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}})
    for name, prio in (("low", 10), ("high", 1000)):
        await create(kube, {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                            "value": prio})


def waiting_workload(name: str, priority: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": "demo"},
            "spec": {"queueName": "lq", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


async def test_the_dashboard_shows_usage_positions_and_a_preemption_in_a_browser(
        bus: Bus, nats_config: NatsConfig, sim: KubeSim, kube: KubeClient, tmp_path: Path) -> None:
    _browser_or_skip()
    await make_cohort_world(kube)
    async with running_watcher(bus, sim, tmp_path, [C]), running_admission(nats_config, sim, tmp_path), \
            serving(nats_config, C, "127.0.0.1", 0) as (feed, port):
        low = await workload_of_job(kube, await create(kube, job_doc("low", runtime="1h", parallelism=4,
                                                                      priority_class="low")))

        async def low_admitted() -> bool:
            assert any(d.name == low and type(d).__name__ == "WorkloadAdmittedEvent" for d in feed.decisions)
            return True

        await eventually(low_admitted, timeout=30, what="low admitted")
        high = await workload_of_job(kube, await create(kube, job_doc("high", runtime="1h", parallelism=3,
                                                                       priority_class="high")))
        for name, prio in (("w-a", 5), ("w-b", 9)):
            await create(kube, waiting_workload(name, prio, cpu="3"))

        with chromium(tmp_path) as browser:
            await asyncio.to_thread(browser.get, f"http://127.0.0.1:{port}/")

            async def settled() -> dict[str, Any]:
                seen = await asyncio.to_thread(page_reading, browser)
                cq = seen["cards"].get("cq")
                assert cq is not None, seen
                assert cq["bars"][("pool-a", "cpu")][0] == 75.0, cq["bars"]
                assert [r[2] for r in cq["pending"]] == [f"demo/{low}", "demo/w-b", "demo/w-a"], cq["pending"]
                assert ("Preempted", low) in seen["recent"] and ("Admitted", high) in seen["recent"], seen["recent"]
                return seen

            seen = await eventually(settled, timeout=60, interval=0.5, what="the page showing the preemption")
            png = await asyncio.to_thread(browser.get_screenshot_as_png)

    assert seen["cohorts"] == ["▸ org", "▸ research"]
    cq = seen["cards"]["cq"]
    assert "3 / 4" in cq["bars"][("pool-a", "cpu")][1]
    # positions come from the visibility API: priority order, then queue order
    assert [r[:2] for r in cq["pending"]] == [["0", "0"], ["1", "1"], ["2", "2"]]
    assert all("insufficient" in r[5].lower() or "quota" in r[5].lower() for r in cq["pending"]), cq["pending"]
    assert seen["cards"]["cq-small"]["bars"][("pool-a", "cpu")][0] == 0.0
    assert seen["recent"].index(("Preempted", low)) < seen["recent"].index(("Admitted", low)), "newest first"
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    if os.environ.get("KQ_WRITE_SCREENSHOT"):
        (ROOT / "docs" / "dashboard.png").write_bytes(png)
