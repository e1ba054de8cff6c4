"""MultiKueue worker clusters' queue statuses are paced by workerStatusIntervalS, the others' by
statusIntervalS (a kq serving 20 workers wrote 20 clusters' queue statuses twice a second)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kq.clock import FakeClock
from kq.config import ConfigError, parse_config
from services.admission.core.model import SchedulerConfig
from services.admission.leader import LeaderTerm, TermSettings


def test_worker_clusters_get_the_worker_interval() -> None:
    bus: Any = SimpleNamespace(clock=FakeClock())
    term = LeaderTerm(bus, ("manager", "worker-1"), SchedulerConfig(), 1,
                      TermSettings(status_interval_s=0.5, worker_status_interval_s=4.0),
                      workers=frozenset({"worker-1"}))
    assert term.partitions["manager"].status_interval_s == 0.5
    assert term.partitions["worker-1"].status_interval_s == 4.0


def test_the_worker_interval_is_read_from_the_config_and_checked() -> None:
    cfg = parse_config("admission: {term: {workerStatusIntervalS: 2}}")
    assert cfg.admission.term.worker_status_interval_s == 2.0
    assert TermSettings().worker_status_interval_s == 15.0
    with pytest.raises(ConfigError, match=r"worker_?[sS]tatus_?[iI]nterval"):
        parse_config("admission: {term: {workerStatusIntervalS: -1}}")
