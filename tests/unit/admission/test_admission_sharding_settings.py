"""Sharded admission settings: fair shares, and what sharding cannot honour is refused naming it."""

from __future__ import annotations

import msgspec
import pytest

from kq.config import AdmissionConfig, ConfigError
from services.admission.core.model import SchedulerConfig
from services.admission.slots import check_sharding, fair_share


@pytest.mark.parametrize(("shards", "replicas", "share"), [(4, 1, 4), (4, 2, 2), (4, 3, 2), (2, 3, 1), (1, 5, 1)])
def test_a_replica_stands_for_at_most_its_fair_share(shards: int, replicas: int, share: int) -> None:
    assert fair_share(shards, replicas) == share


def test_shards_must_be_positive() -> None:
    with pytest.raises(msgspec.ValidationError, match="shards: must be greater than 0"):
        msgspec.convert({"shards": 0}, AdmissionConfig)


def test_block_admission_is_refused_with_more_than_one_shard() -> None:
    blocking = SchedulerConfig(block_admission=True)
    check_sharding(AdmissionConfig(shards=1), blocking)
    check_sharding(AdmissionConfig(shards=2), SchedulerConfig())
    with pytest.raises(ConfigError, match=r"admission.shards > 1 .*blockAdmission"):
        check_sharding(AdmissionConfig(shards=2), blocking)
