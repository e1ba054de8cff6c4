"""`settled` waits for waitForPodsReady deadlines still ahead (kq.scenario.observe.pods_ready_timers)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from kq.api.kueue import Workload
from kq.config import WaitForPodsReady
from kq.scenario.observe import pods_ready_timers

NOW = datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)


def wl(name: str, *conds: tuple[str, str, str, str], active: bool = True) -> Workload:
    return msgspec.convert({"metadata": {"name": name, "namespace": "ns"}, "spec": {"active": active},
                            "status": {"conditions": [{"type": t, "status": s, "reason": r, "message": "",
                                                       "lastTransitionTime": at} for t, s, r, at in conds]}},
                           Workload)


ADMITTED_5 = ("Admitted", "True", "Admitted", "2026-01-01T00:00:05Z")
CFG = WaitForPodsReady(timeout="10s", recovery_timeout="2s")


@pytest.mark.parametrize(
    "w, cfg, busy",
    [
        pytest.param(wl("w", ADMITTED_5), CFG, True, id="waiting-to-start"),
        pytest.param(wl("w", ADMITTED_5, ("PodsReady", "True", "Started", "2026-01-01T00:00:06Z")), CFG, False,
                     id="ready"),
        pytest.param(wl("w", ADMITTED_5), WaitForPodsReady(timeout="3s"), False, id="deadline-long-past"),
        pytest.param(wl("w", ADMITTED_5, ("PodsReady", "False", "WaitForRecovery", "2026-01-01T00:00:09Z")), CFG,
                     True, id="recovering"),
        pytest.param(wl("w", ADMITTED_5, ("PodsReady", "False", "WaitForRecovery", "2026-01-01T00:00:09Z")),
                     WaitForPodsReady(timeout="10s", recovery_timeout="0s"), False, id="recovery-not-timed"),
        pytest.param(wl("w", ADMITTED_5, ("Evicted", "True", "PodsReadyTimeout", "2026-01-01T00:00:09Z")), CFG, False,
                     id="evicted"),
        pytest.param(wl("w", ADMITTED_5, active=False), CFG, False, id="deactivated"),
        pytest.param(wl("w"), CFG, False, id="not-admitted"),
    ],
)
def test_pods_ready_timers(w: Workload, cfg: WaitForPodsReady, busy: bool) -> None:
    assert bool(pods_ready_timers([w], cfg, NOW)) is busy
