"""Which stack a command talks to: the bus and the clusters' kubeconfigs.

Either the stack.json of a local stack (`--dir`, default .kq/stack) or explicit
`--nats URL` / `--kubeconfig PATH` (then the cluster is called `--cluster`, default
manager). An explicit flag wins over the state file; `KUBECONFIG` counts as `--kubeconfig`
(as kubectl reads it) unless `--dir` names a local stack; `--context` picks a context.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

from kq.cli.busread import stack_nats
from kq.config import NatsConfig, kubeconfig_from_env
from kq.stack.state import DEFAULT_DIR, StackState, StateError, read_state

DEFAULT_CLUSTER = "manager"


class TargetError(RuntimeError):
    pass


class Target(NamedTuple):
    cluster: str  # the cluster this command is about
    nats_url: str | None
    kubeconfig: str | None  # of `cluster`
    state: StackState | None
    context: str | None = None  # the kubeconfig context (--context), else its current-context

    def need_nats(self) -> NatsConfig:
        if not self.nats_url:
            raise TargetError("no NATS URL: give --nats URL, or start a local stack with `kq up`")
        if self.state is not None and self.state.nats_url == self.nats_url:  # the local stack's (maybe closed) bus
            return stack_nats(self.nats_url, self.state.config)
        return NatsConfig(url=self.nats_url)

    def need_kubeconfig(self) -> str:
        if not self.kubeconfig:
            raise TargetError(f"no kubeconfig for cluster {self.cluster!r}: give --kubeconfig PATH, "
                              "or start a local stack with `kq up`")
        return self.kubeconfig


def stack_dir(args: argparse.Namespace) -> Path:
    given = getattr(args, "dir", None)
    return Path(given) if given else DEFAULT_DIR


def resolve(args: argparse.Namespace) -> Target:
    cluster = getattr(args, "cluster", None) or DEFAULT_CLUSTER
    nats_url = getattr(args, "nats", None)
    # --kubeconfig, else KUBECONFIG (as kubectl), unless a local stack's --dir is named; else the stack's.
    kubeconfig = getattr(args, "kubeconfig", None)
    if not kubeconfig and not getattr(args, "dir", None):
        kubeconfig = kubeconfig_from_env()
    state: StackState | None = None
    if not nats_url or not kubeconfig:
        try:
            state = read_state(stack_dir(args))
        except StateError as e:
            if getattr(args, "dir", None) or (not nats_url and not kubeconfig):
                raise TargetError(str(e)) from None
    if state is not None:
        nats_url = nats_url or state.nats_url
        if not kubeconfig:
            try:
                kubeconfig = state.cluster(cluster).kubeconfig
            except StateError as e:
                raise TargetError(str(e)) from None
    return Target(cluster=cluster, nats_url=nats_url, kubeconfig=kubeconfig, state=state,
                  context=getattr(args, "context", None))
