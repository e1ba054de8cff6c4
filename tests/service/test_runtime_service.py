"""run_service as a real process: health, work, SIGTERM -> drain -> exit 0; failures -> non-zero."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from collections.abc import Awaitable
from pathlib import Path

import pytest
from support.wait import eventually

from kq import subjects
from kq.runtime import Bus, wait_healthy

pytestmark = pytest.mark.timeout(60)

SERVICE = textwrap.dedent(
    """
    import sys
    from kq import subjects
    from kq.runtime import run_service

    async def main(bus, config):
        if sys.argv[1] == "fail":
            raise RuntimeError("main failed on purpose")

        async def handler(d):
            await bus.publish(subjects.event_subject("c1", "echo", "ns", "x"), d.data, msg_id="echo-" + d.data.decode())

        await bus.consume("echo", subjects.COMMANDS_STREAM, subjects.command_filter("c1"), handler)

    raise SystemExit(run_service("echosvc", main))
    """
)


async def start(mode: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVICE, mode,
        env={**os.environ, **env}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def _is(value: Awaitable[object], want: object) -> bool:
    return await value == want


def json_lines(text: bytes) -> list[dict]:
    out = []
    for line in text.decode().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


async def test_service_runs_and_stops_cleanly_on_sigterm(bus: Bus, nats_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "kq.yaml"
    cfg.write_text(f"nats:\n  url: {nats_url}\nlogDir: {tmp_path / 'logs'}\ninstance: i7\n")
    proc = await start("run", {"KQ_CONFIG": str(cfg)})
    try:
        st = await wait_healthy(bus.nc, "echosvc", timeout=20)
        assert (st.service, st.instance, st.status) == ("echosvc", "i7", "ready")
        await bus.publish(subjects.command_subject("c1", "workload"), b"42", msg_id="c-42")
        echo = subjects.event_subject("c1", "echo", "ns", "x")
        m = await eventually(lambda: bus.js.get_last_msg(subjects.EVENTS_STREAM, echo), timeout=10)
        assert m.data == b"42"

        async def settled() -> tuple[int, int, int]:
            ci = await bus.js.consumer_info(subjects.COMMANDS_STREAM, "echo")
            return ci.num_ack_pending, ci.num_pending, ci.ack_floor.stream_seq

        # the command is acked once its effect is stored (nats-server applies acks asynchronously)
        await eventually(lambda: _is(settled(), (0, 0, 1)), timeout=10, what="command acked")
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = json_lines(err)
    events = [ln["event"] for ln in lines]
    assert "stop requested; shutting down" in events and events[-1] == "service stopped"
    assert all(ln["service"] == "echosvc" and ln["instance"] == "i7" and "level" in ln for ln in lines)
    log_file = tmp_path / "logs" / "echosvc-i7.log"
    assert [ln["event"] for ln in json_lines(log_file.read_bytes())] == events
    # nothing was left pending or redelivered by the shutdown
    ci = await bus.js.consumer_info(subjects.COMMANDS_STREAM, "echo")
    assert (ci.num_ack_pending, ci.num_pending, ci.num_redelivered, ci.ack_floor.stream_seq) == (0, 0, 0, 1)


async def test_failing_main_exits_non_zero_with_the_error(bus: Bus, nats_url: str) -> None:
    proc = await start("fail", {"KQ_NATS_URL": nats_url, "KQ_CONFIG": ""})
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    (failed,) = [ln for ln in json_lines(err) if ln["event"] == "service failed"]
    assert "main failed on purpose" in failed["error"] and "Traceback" in failed["exception"]


async def test_bad_configuration_exits_2_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "kq.yaml"
    cfg.write_text("nats:\n  urll: nats://x\n")
    proc = await start("run", {"KQ_CONFIG": str(cfg)})
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert "urll" in err.decode()
