"""The local stack (`kq up` / `kq down`, the scenario harness, the e2e tests)."""

from kq.stack.process import ProcessRecord, is_alive, log_tail
from kq.stack.stack import DEFAULT_CLUSTERS, Stack, StackError, discover_services, process_name, stop_stack
from kq.stack.state import DEFAULT_DIR, ClusterRecord, StackState, StateError, read_state

__all__ = [
    "DEFAULT_CLUSTERS",
    "DEFAULT_DIR",
    "ClusterRecord",
    "ProcessRecord",
    "Stack",
    "StackError",
    "StackState",
    "StateError",
    "discover_services",
    "is_alive",
    "log_tail",
    "process_name",
    "read_state",
    "stop_stack",
]
