"""One JetStream message as a handler sees it: body, headers and delivery metadata, no ack methods.

Acknowledging is the runtime's job (consume.py), decided from how the handler ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import msgspec
from nats.aio.msg import Msg

_EMPTY: Mapping[str, str] = MappingProxyType({})


class Delivery(msgspec.Struct, frozen=True, gc=False):
    subject: str
    data: bytes
    headers: Mapping[str, str]
    stream: str
    consumer: str
    stream_seq: int
    consumer_seq: int
    deliveries: int  # 1 on first delivery, more on redelivery
    pending: int  # messages left for this consumer after this one, when it was sent
    timestamp_ns: int  # when the stream stored it
    reply: str  # the ack subject; only the runtime uses it


class NotJetStreamMessage(ValueError):
    pass


def to_delivery(msg: Msg) -> Delivery:
    """Parse the ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>,
    or the v2 form with <domain>.<account hash> after ACK and a random token at the end."""
    reply = msg.reply
    tokens = reply.split(".") if reply else []
    if len(tokens) == 9:
        o = 2
    elif len(tokens) >= 11:
        o = 4
    else:
        raise NotJetStreamMessage(f"not a JetStream delivery (reply {reply!r}) on {msg.subject!r}")
    if tokens[0] != "$JS" or tokens[1] != "ACK":
        raise NotJetStreamMessage(f"not a JetStream delivery (reply {reply!r}) on {msg.subject!r}")
    return Delivery(
        subject=msg.subject,
        data=msg.data,
        headers=msg.headers or _EMPTY,
        stream=tokens[o],
        consumer=tokens[o + 1],
        deliveries=int(tokens[o + 2]),
        stream_seq=int(tokens[o + 3]),
        consumer_seq=int(tokens[o + 4]),
        timestamp_ns=int(tokens[o + 5]),
        pending=int(tokens[o + 6]),
        reply=reply,
    )
