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
from dataclasses import dataclass, field

import nats
from nats.js.api import AckPolicy, ConsumerConfig

STREAM = "KQ_MK"
PENDING = "kq.v1.mk.pending.>"
SETTLED = "kq.v1.mk.settled.>"


@dataclass
class Wait:
    """One workload's wait: where its nominations go and who has been nominated."""

    subject: str  # kq.v1.mk.nominate.<ns>.<name>
    key: str  # the pending message's stream sequence: names this wait's nominations
    clusters: list[str]  # connected workers, as the pending message listed them
    nominated: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Nomination:
    uid: str
    subject: str
    clusters: tuple[str, ...]
    msg_id: str  # the bus drops a repeat of the same nomination

    def body(self) -> bytes:
        return json.dumps({"clusters": list(self.clusters), "uid": self.uid}).encode()


class Spread:
    """The decisions, apart from the bus and the clock: what to nominate for each message or timer."""

    def __init__(self) -> None:
        self.load: dict[str, int] = {}  # worker -> nominations so far
        self.waits: dict[str, Wait] = {}  # workload uid -> its open wait

    def pending(self, subject: str, seq: int, body: dict) -> Nomination | None:
        uid = body["uid"]
        wait = self.waits.get(uid)
        if wait is None or not wait.nominated:
            self.waits[uid] = Wait(subject=subject.replace(".mk.pending.", ".mk.nominate.", 1), key=str(seq),
                                   clusters=list(body["clusters"]))
            return self.widen(uid)
        # The same workload published again (a new wait kq saw: the nomination may not have
        # landed): the same nomination again, never a wider one, under this message's key so the
        # bus does not take it for a repeat.
        wait.key, wait.clusters = str(seq), list(body["clusters"])
        return self._nomination(uid, wait)

    def settled(self, uid: str) -> None:
        self.waits.pop(uid, None)

    def widen(self, uid: str) -> Nomination | None:
        """One more worker for an open wait: the one nominated least so far (ties by name)."""
        wait = self.waits.get(uid)
        if wait is None:
            return None
        free = [c for c in wait.clusters if c not in wait.nominated]
        if not free:
            return None
        chosen = min(free, key=lambda c: (self.load.get(c, 0), c))
        self.load[chosen] = self.load.get(chosen, 0) + 1
        wait.nominated.append(chosen)
        return self._nomination(uid, wait)

    def can_widen(self, uid: str) -> bool:
        wait = self.waits.get(uid)
        return wait is not None and len(wait.nominated) < len(wait.clusters)

    @staticmethod
    def _nomination(uid: str, wait: Wait) -> Nomination:
        return Nomination(uid=uid, subject=wait.subject, clusters=tuple(wait.nominated),
                          msg_id=f"spread:{wait.key}:{len(wait.nominated)}")


async def run(url: str, widen_after_s: float, durable: str, quiet: bool) -> None:
    nc = await nats.connect(url, name="spread-dispatcher")
    js = nc.jetstream()
    spread = Spread()
    timers: dict[str, asyncio.TimerHandle] = {}  # uid -> the timer that widens its wait
    widening: set[asyncio.Task[None]] = set()  # nominations a timer is sending
    loop = asyncio.get_running_loop()

    async def send(nom: Nomination) -> None:
        await js.publish(nom.subject, nom.body(), headers={"Nats-Msg-Id": nom.msg_id})
        if not quiet:
            print(f"{nom.subject.split('.', 4)[4].replace('.', '/', 1)} -> {list(nom.clusters)}", flush=True)

    def arm(uid: str) -> None:
        if (old := timers.pop(uid, None)) is not None:
            old.cancel()
        if spread.can_widen(uid):
            timers[uid] = loop.call_later(widen_after_s, fire, uid)

    def fire(uid: str) -> None:
        timers.pop(uid, None)
        if (nom := spread.widen(uid)) is not None:
            task = loop.create_task(send(nom))
            widening.add(task)
            task.add_done_callback(widening.discard)
            arm(uid)

    # AckPolicy.ALL: one ack for each batch, once its nominations are stored.
    sub = await js.pull_subscribe("", durable=durable, stream=STREAM, config=ConsumerConfig(
        filter_subjects=[PENDING, SETTLED], ack_policy=AckPolicy.ALL))
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"spread dispatcher: widening after {widen_after_s:g} s", flush=True)
    while not stop.is_set():
        try:
            msgs = await sub.fetch(256, timeout=1)
        except TimeoutError:  # nats-py raises asyncio's (the builtin) or its own subclass of it
            continue
        if not msgs:  # nats-py may also answer an expired pull with no messages
            continue
        noms = []
        for msg in msgs:
            body = json.loads(msg.data)
            if ".mk.settled." in msg.subject:
                spread.settled(body["uid"])
                if (t := timers.pop(body["uid"], None)) is not None:
                    t.cancel()
            elif (nom := spread.pending(msg.subject, msg.metadata.sequence.stream, body)) is not None:
                noms.append(nom)
                arm(nom.uid)
        await asyncio.gather(*(send(n) for n in noms))
        await msgs[-1].ack()
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
