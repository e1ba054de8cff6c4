"""An external MultiKueue dispatcher over the bus: "one worker per job, spread evenly".

kq's dispatcher publishes each quota-reserved workload that starts waiting for a nomination (the
Kueue configuration's multiKueue.dispatcherName is not one of Kueue's built-in dispatchers) on

    kq.v1.mk.pending.<namespace>.<name>      (JetStream stream KQ_MK; JSON, see cheapest_region.py)

once per wait, and on

    kq.v1.mk.settled.<namespace>.<name>      {"namespace": ..., "name": ..., "uid": ..., "cluster": "worker-3"}

when that wait is over (admitted on `cluster`, or "" when the workload stopped holding quota). It
takes nominations on kq.v1.mk.nominate.<namespace>.<name> ({"clusters": [...], "uid": ...}).

Kueue's Incremental dispatcher copies every job to 3 workers and deletes the copies that lose;
this one nominates ONE worker, the connected worker it has nominated least so far (ties by name,
so the choice is deterministic), and widens by one more only if the same wait is still not
settled after --widen-after seconds. A pending message for a workload it already nominated (kq
published it again: a restart, a worker connecting) gets the same nomination again, never a
wider one. It is plain nats-py: no kq import.

    python examples/dispatchers/spread.py --nats nats://127.0.0.1:4222 --widen-after 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import nats
from nats.js.api import ConsumerConfig

Publish = Callable[[str, bytes, str], Awaitable[None]]  # subject, body, message id
STREAM = "KQ_MK"
PENDING = "kq.v1.mk.pending.>"
SETTLED = "kq.v1.mk.settled.>"


@dataclass
class Wait:
    """One workload's wait: where it goes, and the timer that widens it."""

    subject: str  # kq.v1.mk.nominate.<ns>.<name>
    key: str  # the pending message's stream sequence: names this wait's nominations
    clusters: list[str]  # connected workers, as the pending message listed them
    nominated: list[str] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class Spread:
    def __init__(self, widen_after_s: float, publish: Publish, log: bool = True) -> None:
        self.widen_after_s = widen_after_s
        self.publish = publish
        self.log = log
        self.load: dict[str, int] = {}  # worker -> nominations so far
        self.waits: dict[str, Wait] = {}  # workload uid -> its open wait

    def pick(self, clusters: list[str], taken: list[str]) -> str | None:
        free = [c for c in clusters if c not in taken]
        return min(free, key=lambda c: (self.load.get(c, 0), c)) if free else None

    async def pending(self, subject: str, seq: int, body: dict) -> None:
        uid = body["uid"]
        wait = self.waits.get(uid)
        if wait is None or not wait.nominated:
            wait = Wait(subject=subject.replace(".mk.pending.", ".mk.nominate.", 1), key=str(seq),
                        clusters=list(body["clusters"]))
            self.waits[uid] = wait
            await self.widen(uid)
            return
        # The same workload published again: answer as before (kq's dispatcher drops nothing it
        # has not seen land), under this message's key so the bus does not take it for a repeat.
        wait.key, wait.clusters = str(seq), list(body["clusters"])
        await self._send(uid, wait)

    def settled(self, body: dict) -> None:
        wait = self.waits.pop(body["uid"], None)
        if wait is not None and wait.timer is not None:
            wait.timer.cancel()

    async def widen(self, uid: str) -> None:
        wait = self.waits.get(uid)
        if wait is None:
            return
        chosen = self.pick(wait.clusters, wait.nominated)
        if chosen is not None:
            self.load[chosen] = self.load.get(chosen, 0) + 1
            wait.nominated.append(chosen)
            await self._send(uid, wait)
        if len(wait.nominated) < len(wait.clusters):
            loop = asyncio.get_running_loop()
            wait.timer = loop.call_later(self.widen_after_s, lambda: loop.create_task(self.widen(uid)))

    async def _send(self, uid: str, wait: Wait) -> None:
        body = json.dumps({"clusters": wait.nominated, "uid": uid}).encode()
        await self.publish(wait.subject, body, f"spread:{wait.key}:{len(wait.nominated)}")
        if self.log:
            print(f"{wait.subject.split('.', 4)[4].replace('.', '/', 1)} -> {wait.nominated}", flush=True)


async def run(url: str, widen_after_s: float, durable: str, quiet: bool) -> None:
    nc = await nats.connect(url, name="spread-dispatcher")
    js = nc.jetstream()

    async def publish(subject: str, body: bytes, msg_id: str) -> None:
        await js.publish(subject, body, headers={"Nats-Msg-Id": msg_id})

    spread = Spread(widen_after_s, publish, log=not quiet)
    sub = await js.pull_subscribe("", durable=durable, stream=STREAM,
                                  config=ConsumerConfig(filter_subjects=[PENDING, SETTLED]))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"spread dispatcher: widening after {widen_after_s:g} s", flush=True)
    while not stop.is_set():
        try:
            msgs = await sub.fetch(256, timeout=1)
        except TimeoutError:  # nats-py raises asyncio's (the builtin) or its own subclass of it
            continue
        for msg in msgs:
            body = json.loads(msg.data)
            if ".mk.settled." in msg.subject:
                spread.settled(body)
            else:
                await spread.pending(msg.subject, msg.metadata.sequence.stream, body)
            await msg.ack()
    await nc.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nats", default="nats://127.0.0.1:4222")
    p.add_argument("--widen-after", type=float, default=30.0, metavar="SECONDS",
                   help="nominate one more worker when a wait is not settled after this long (default 30)")
    p.add_argument("--durable", default="spread")
    p.add_argument("--quiet", action="store_true", help="no line per nomination")
    args = p.parse_args()
    asyncio.run(run(args.nats, args.widen_after, args.durable, args.quiet))


if __name__ == "__main__":
    main()
