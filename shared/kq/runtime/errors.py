"""Retryability as data on the error, and the one mapping from outcome to JetStream action.

A handler returns normally (ack), raises TemporaryError (nak with its delay: the
message comes back), or raises PermanentError (term, and a dead-letter message
records why). Anything else is a bug and is treated as permanent, loudly; bus
trouble (timeouts, a lost connection) while handling is temporary.
"""

from __future__ import annotations

import asyncio
import enum

import msgspec
import nats.errors

DEFAULT_RETRY_DELAY_S = 1.0


class TemporaryError(Exception):
    """Try this message again after `delay_s` seconds."""

    def __init__(self, message: str, delay_s: float = DEFAULT_RETRY_DELAY_S) -> None:
        super().__init__(message)
        self.message = message
        self.delay_s = delay_s


class PermanentError(Exception):
    """This message can never succeed: dead-letter it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Action(enum.Enum):
    ACK = "ack"
    NAK = "nak"  # redeliver after a delay
    TERM = "term"  # dead-letter, never redeliver


class Outcome(msgspec.Struct, frozen=True):
    action: Action
    delay_s: float = 0.0
    error_type: str = ""
    error: str = ""


ACKED = Outcome(Action.ACK)


def classify(exc: BaseException | None, *, deliveries: int = 1, max_deliver: int | None = None) -> Outcome:
    """What to do with a message whose handler ended with `exc` (None = success)."""
    if exc is None:
        return ACKED
    name = type(exc).__name__
    if isinstance(exc, TemporaryError):
        outcome = Outcome(Action.NAK, max(0.0, exc.delay_s), name, exc.message)
    elif isinstance(exc, (nats.errors.Error, asyncio.TimeoutError, ConnectionError)):
        outcome = Outcome(Action.NAK, DEFAULT_RETRY_DELAY_S, name, str(exc) or name)
    elif isinstance(exc, PermanentError):
        return Outcome(Action.TERM, 0.0, name, exc.message)
    else:
        return Outcome(Action.TERM, 0.0, name, str(exc) or repr(exc))
    if max_deliver is not None and deliveries >= max_deliver:
        return Outcome(Action.TERM, 0.0, name, f"gave up after {deliveries} deliveries: {outcome.error}")
    return outcome


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """Published on subjects.dead_letter_subject(service) when a message is given up."""

    service: str
    instance: str
    consumer: str
    stream: str
    stream_seq: int
    subject: str
    deliveries: int
    error_type: str
    error: str
    at: str  # RFC 3339, when it was given up
    headers: dict[str, str] = {}
    data: bytes = b""  # the original body (base64 in JSON)


dead_letter_decoder = msgspec.json.Decoder(DeadLetter)
