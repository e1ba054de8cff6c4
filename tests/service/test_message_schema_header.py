"""Every message kq publishes says which schema its payload follows (kq.messages SCHEMA_VERSION)."""

from __future__ import annotations

from kq import subjects
from kq.messages import SCHEMA_HEADER, SCHEMA_VERSION, Fence
from kq.runtime import Bus
from kq.runtime.bus import OutMsg


async def test_published_commands_carry_the_schema_version(bus: Bus) -> None:
    await bus.ensure_streams()
    subject = subjects.command_subject("schema-test", "fence")
    one = await bus.publish(subject, Fence(id="f1", cluster="schema-test", writer="t"), msg_id="schema-f1")
    await bus.publish_batch([OutMsg(subject, Fence(id="f2", cluster="schema-test", writer="t"), "schema-f2")])
    first = await bus.js.get_msg(subjects.COMMANDS_STREAM, one.seq)
    second = await bus.js.get_msg(subjects.COMMANDS_STREAM, one.seq + 1)
    assert (first.headers or {}).get(SCHEMA_HEADER) == str(SCHEMA_VERSION)
    assert (second.headers or {}).get(SCHEMA_HEADER) == str(SCHEMA_VERSION)
