"""kubesim runs no containers; a container whose whole command is `sleep N` (echos aside) runs N seconds."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.controllers.kubelet import _runtime, _sleep_seconds

CASES = [
    ("kueue-sample", {"command": ["/bin/sh"], "args": ["-c", "sleep 60"]}, 60.0),
    ("bash-exec", {"command": ["bash", "-c", "exec sleep 1.5"]}, 1.5),
    ("sleep-binary", {"command": ["sleep"], "args": ["2m"]}, 120.0),
    ("more-than-sleep", {"command": ["sh", "-c", "sleep 5 && python train.py"]}, None),
    ("echo-then-sleep", {"command": ["sh", "-c", 'echo "hello world from the leader pod" && sleep 3']}, 3.0),
    ("sleep-then-echo", {"command": ["sh", "-c", "sleep 5; echo done"]}, 5.0),
    ("echo-redirect", {"command": ["sh", "-c", "echo x > /tmp/f && sleep 1"]}, None),
    ("no-command", {"image": "busybox"}, None),
    ("other-program", {"command": ["python", "train.py"]}, None),
]


@pytest.mark.parametrize(("container", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_sleep_seconds(container: dict, want: float | None) -> None:
    assert _sleep_seconds(container) == want


def test_annotation_wins_and_scale_applies_to_sleep_only() -> None:
    sleeper = {"command": ["sh", "-c", "sleep 60"]}
    pod: dict[str, Any] = {"metadata": {}, "spec": {"containers": [sleeper, {"command": ["sleep", "10"]}]}}
    assert _runtime(pod, 0.1) == pytest.approx(6.0)  # the longest container, scaled
    pod["metadata"]["annotations"] = {"kq.dev/runtime": "500ms"}
    assert _runtime(pod, 0.1) == 0.5
    assert _runtime({"metadata": {}, "spec": {"containers": [sleeper, {"image": "x"}]}}) is None
