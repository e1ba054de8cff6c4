"""Least privilege on the bus: one NATS user per kq service, publishing only what it owns.

The one table of who may publish what, read by `kq up --secure` (kq.stack.secure) and rendered
into deploy/nats (a test keeps the two equal). A service may publish:

- its own state: the watcher alone mirrors objects (`obj`, `sync`) and reports command outcomes
  (`out`); a writer sends commands only on its own subjects `kq.v1.cmd.<cluster>.<kind>.<writer>`
  (the watcher checks that the command's `writer` is the subject's and that this writer may send
  that command, services/watcher/core/authority.py); decisions only on the kinds it decides
  about; its own lease key, dead letters and timers;
- the JetStream calls a consumer makes (consumer create/next/ack, stream info, direct get), and
  replies to inboxes. Not: creating, changing, purging or deleting streams (the stack's admin
  user sets them up; podsready may purge its own timers).

Subscriptions are open (the bus holds no secrets: Secrets are never mirrored) except the two
request subjects whose answers others trust: only tas may take `kq.v1.tas.solve` and only
admission may answer `kq.v1.visibility.*`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kq import subjects
from kq.config import MAX_ADMISSION_SHARDS

P = subjects.PREFIX
LEASES = "$KV.KQ_LEASES"

# Every kq client: be a JetStream consumer and answer or ask with request/reply.
CONSUMER = (
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.*",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.LIST",
    "$JS.API.STREAM.MSG.GET.*",
    "$JS.API.DIRECT.GET.>",
    "$JS.API.CONSUMER.>",
    "$JS.ACK.>",
    "$JS.FC.>",
    "_INBOX.>",
    f"{P}.health.>",
)
OWNED_REQUESTS = {subjects.TAS_SOLVE: "tas", f"{P}.visibility.>": "admission"}


def _cmd(writer: str) -> str:
    return f"{P}.cmd.*.*.{writer}"


def _shard_cmds() -> tuple[str, ...]:
    """Sharded admission writes as "admission-<slot>" (services/admission/handover.py)."""
    return tuple(_cmd(f"admission-{slot}") for slot in range(MAX_ADMISSION_SHARDS))


def _own(service: str) -> tuple[str, ...]:
    return (f"{P}.dlq.{service}", f"{LEASES}.{service}.>")


# service -> what it may publish besides CONSUMER.
PUBLISH: dict[str, tuple[str, ...]] = {
    "watcher": (*_own("watcher"), f"{P}.obj.>", f"{P}.sync.>", f"{P}.out.>"),
    "admission": (*_own("admission"), _cmd("admission"), *_shard_cmds(), f"{P}.evt.*.workload.>", subjects.TAS_SOLVE),
    "tas": (*_own("tas"), f"{P}.evt.*.topologyhold.>"),
    "podsready": (*_own("podsready"), _cmd("podsready"), f"{P}.evt.*.workload.>", f"{P}.timer.sched.podsready.>",
                  f"$JS.API.STREAM.PURGE.{subjects.TIMERS_STREAM}"),
    "dispatcher": (*_own("dispatcher"), _cmd("dispatcher"), _cmd("dispatcher-guard"), f"{P}.mk.pending.>",
                   f"{P}.mk.settled.>"),
    "gc": (*_own("gc"), _cmd("gc")),
    # An external MultiKueue dispatcher answers nominations (kq.messages.MkNomination).
    "mk-dispatcher": (f"{P}.mk.nominate.>",),
    # The CLI reads the mirror and events and asks for pending workloads.
    "kq-cli": (f"{P}.visibility.>",),
    # The dashboard (`kq dashboard`) reads as the CLI does.
    "kq-dashboard": (f"{P}.visibility.>",),
}
ADMIN = "kq-stack"  # sets up the streams (kq up, a setup Job): may do anything


def users() -> list[str]:
    return [*PUBLISH, ADMIN]


def permissions(user: str) -> dict[str, Any]:
    """The NATS `permissions` block of one user."""
    if user == ADMIN:
        return {"publish": {"allow": [">"]}, "subscribe": {"allow": [">"]}}
    if user not in PUBLISH:
        raise KeyError(f"no bus user {user!r} (known: {', '.join(users())})")
    deny = sorted(s for s, owner in OWNED_REQUESTS.items() if owner != user)
    sub: dict[str, Any] = {"allow": [">"]}
    if deny:
        sub["deny"] = deny
    return {"publish": {"allow": [*CONSUMER, *PUBLISH[user]]}, "subscribe": sub}


DEPLOY_SETUP = "kq-setup"  # deploy/: the Job that sets up the streams is the admin user


def deploy_subject(user: str) -> str:
    """deploy/: who a user is on the bus, the subject of its client certificate (NATS TLS
    `verify_and_map`; cert-manager issues each service's certificate, deploy/nats/certificates.yaml)."""
    if user == ADMIN:
        return f"CN={DEPLOY_SETUP}"
    return f"CN={user}" if user.startswith("kq-") else f"CN=kq-{user}"


def deploy_authorization() -> str:
    """The `authorization` block of deploy/nats/config.yaml: one user per line, by certificate subject."""
    lines = [f'  {{user: "{deploy_subject(u)}", permissions: {msgspec.json.encode(permissions(u)).decode()}}}'
             for u in users()]
    return "authorization {\n  users = [\n" + ",\n".join("  " + ln for ln in lines) + "\n  ]\n}\n"


def server_authorization(nkeys: dict[str, str]) -> str:
    """nats-server's `authorization` block for users given as name -> NKey public key (the
    server's config format takes JSON values)."""
    entries = [{"nkey": nkeys[u], "permissions": permissions(u)} for u in users() if u in nkeys]
    return "authorization {\n  users = " + msgspec.json.encode(entries).decode() + "\n}\n"
