"""The one runtime every kq service uses: bus, streams, consumers and ack policy, replay,
leases, health, bounded keyed work, and the process lifecycle (run_service)."""

from kq.runtime.bus import Bus, OutMsg, connect_options, encode_payload
from kq.runtime.consume import consume, consume_batches
from kq.runtime.delivery import Delivery
from kq.runtime.errors import DeadLetter, PermanentError, TemporaryError, dead_letter_decoder
from kq.runtime.executor import KeyedExecutor, Place
from kq.runtime.health import HealthStatus, wait_healthy
from kq.runtime.leadership import Backoff, hold, holder_name, lead, stand
from kq.runtime.lease import Lease
from kq.runtime.replay import Replay
from kq.runtime.service import run_service, serve
from kq.runtime.streams import delete_all_streams, ensure_streams

__all__ = [
    "Backoff",
    "Bus",
    "DeadLetter",
    "Delivery",
    "HealthStatus",
    "KeyedExecutor",
    "Lease",
    "OutMsg",
    "PermanentError",
    "Place",
    "Replay",
    "TemporaryError",
    "connect_options",
    "consume",
    "consume_batches",
    "dead_letter_decoder",
    "delete_all_streams",
    "encode_payload",
    "ensure_streams",
    "hold",
    "holder_name",
    "lead",
    "run_service",
    "serve",
    "stand",
    "wait_healthy",
]
