"""A decision sent again by the next term reaches the watcher, on a real nats-server.

kq chaos found it: a dispatcher term that had just lost its lease sent FinishWorkload, the watcher
refused it (StaleEpoch), and the next term's identical decision carried the same message id, so
the stream's duplicate window dropped it as a repeat and the manager never finished the workload.
"""

from __future__ import annotations

from kq.messages import FinishWorkload, command_msg_id, command_subject_of
from kq.runtime import Bus


def _finish(epoch: int) -> FinishWorkload:
    return FinishWorkload(id="mk:uid-1:42:abc", cluster="manager", writer="dispatcher", epoch=epoch,
                          namespace="ns", name="wl", uid="uid-1", reason="Succeeded", message="done")


async def test_the_same_decision_from_a_new_term_is_stored_and_a_repeat_within_a_term_is_not(bus: Bus) -> None:
    old, new = _finish(epoch=7), _finish(epoch=8)
    first = await bus.publish(command_subject_of(old), old, msg_id=command_msg_id(old))
    repeat = await bus.publish(command_subject_of(old), old, msg_id=command_msg_id(old))
    next_term = await bus.publish(command_subject_of(new), new, msg_id=command_msg_id(new))

    assert repeat.duplicate and repeat.seq == first.seq  # a retry within the term is one command
    assert not next_term.duplicate and next_term.seq > first.seq  # the next term's is a new one
