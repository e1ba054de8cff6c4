"""stack.json: where a running local stack is and which processes make it up.

Written by `kq up` once everything is healthy; read by every other `kq` command to
find the bus and the clusters, and by `kq down` to stop the processes.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from kq.stack.process import ProcessRecord

DEFAULT_DIR = Path(".kq") / "stack"
STATE_FILE = "stack.json"
STATE_VERSION = 1


class ClusterRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    name: str
    role: str  # manager | worker
    kubeconfig: str


class StackState(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    version: int = STATE_VERSION
    dir: str
    nats_url: str
    kubesim_url: str
    config: str  # the generated config.yaml every service reads
    clusters: tuple[ClusterRecord, ...] = ()
    processes: tuple[ProcessRecord, ...] = ()
    started_at: str = ""

    def cluster(self, name: str) -> ClusterRecord:
        for c in self.clusters:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.clusters) or "none"
        raise StateError(f"no cluster {name!r} in the stack at {self.dir} (clusters: {known})")

    def process(self, name: str) -> ProcessRecord | None:
        return next((p for p in self.processes if p.name == name), None)


class StateError(RuntimeError):
    pass


_decoder = msgspec.json.Decoder(StackState)
_encoder = msgspec.json.Encoder()


def state_path(stack_dir: str | os.PathLike[str]) -> Path:
    return Path(stack_dir) / STATE_FILE


def write_state(state: StackState) -> Path:
    """Atomically: a reader never sees half a file."""
    path = state_path(state.dir)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(msgspec.json.format(_encoder.encode(state), indent=2) + b"\n")
    os.replace(tmp, path)
    return path


def read_state(stack_dir: str | os.PathLike[str]) -> StackState:
    path = state_path(stack_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StateError(f"no stack at {stack_dir} ({path} not found); start one with `kq up`") from None
    try:
        state = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise StateError(f"{path}: not a kq stack state file: {e}") from None
    if state.version != STATE_VERSION:
        raise StateError(f"{path}: state version {state.version}, this kq reads {STATE_VERSION}")
    return state


def remove_state(stack_dir: str | os.PathLike[str]) -> None:
    state_path(stack_dir).unlink(missing_ok=True)
