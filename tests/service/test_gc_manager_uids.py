"""gc reads the manager Workloads it needs one by one from the mirror's last values (no replay of
every change), on a real nats-server: present, deleted (tombstone) and never mirrored."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from kq import subjects
from kq.mirror import mirror_msg_id, record_headers
from kq.runtime import Bus, OutMsg
from services.gc.service import Sweeper

pytestmark = pytest.mark.timeout(30)


def record(name: str, rv: str, op: Literal["put", "delete"]) -> OutMsg:
    body = json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                       "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv},
                       "spec": {"queueName": "q", "podSets": []}}).encode()
    return OutMsg(subjects.object_subject("manager", "workload", "ns", name), body,
                  mirror_msg_id("manager", "workload", "ns", name, rv, op),
                  record_headers(op, rv, f"uid-{name}"))


async def test_manager_uids_are_the_mirror_last_values(bus: Bus) -> None:
    await bus.publish_many([record("live", "1", "put"), record("gone", "2", "put"), record("gone", "3", "delete"),
                            record("other", "4", "put")])
    sweeper = Sweeper(bus, "manager", None, "mk", None, None)  # type: ignore[arg-type]  # no worker is reached
    found = await sweeper.manager_uids({("ns", "live"), ("ns", "gone"), ("ns", "never")})
    assert found == {("ns", "live"): "uid-live"}
