"""An external MultiKueue dispatcher over the bus: "cheapest region first".

kq's dispatcher publishes each quota-reserved workload that waits for a nomination (when the
Kueue configuration's multiKueue.dispatcherName is not one of Kueue's built-in dispatchers) on

    kq.v1.mk.pending.<namespace>.<name>      (JetStream stream KQ_MK; JSON, see below)

and takes nominations on

    kq.v1.mk.nominate.<namespace>.<name>     {"clusters": ["worker-2"], "uid": "<workload uid>"}

(names with dots arrive with "~" in their place; copy the tokens as they are). A pending message:

    {"namespace": "ns", "name": "job-j1-x", "uid": "...", "clusterQueue": "cq", "admissionCheck": "mk",
     "clusters": ["worker-1", "worker-2"], "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "2"}}],
     "priority": 0}

kq publishes a workload once per wait: when it holds quota and nothing is nominated (again after
an eviction, or when the connected workers change while it waits). This one nominates the cheapest
connected worker by a price list; each time the same workload is published again it widens the
nomination by one more worker, next cheapest first. It is plain nats-py: no kq import.

    python examples/dispatchers/cheapest_region.py --nats nats://127.0.0.1:4222 \\
        --prices worker-1=3.0,worker-2=1.2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal

import nats

PENDING = "kq.v1.mk.pending.>"
STREAM = "KQ_MK"


def parse_prices(text: str) -> dict[str, float]:
    prices = {}
    for part in filter(None, text.split(",")):
        cluster, _, price = part.partition("=")
        prices[cluster.strip()] = float(price)
    return prices


def choose(clusters: list[str], prices: dict[str, float], how_many: int) -> list[str]:
    """The `how_many` cheapest of the connected clusters (unpriced ones last, by name)."""
    ranked = sorted(clusters, key=lambda c: (prices.get(c, float("inf")), c))
    return ranked[:max(1, how_many)]


async def run(url: str, prices: dict[str, float], durable: str) -> None:
    nc = await nats.connect(url, name="cheapest-region-dispatcher")
    js = nc.jetstream()
    sub = await js.pull_subscribe(PENDING, durable=durable, stream=STREAM)
    widened: dict[str, int] = {}  # workload uid -> clusters nominated so far
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"cheapest-region dispatcher: prices {prices}", flush=True)
    while not stop.is_set():
        try:
            msgs = await sub.fetch(16, timeout=1)
        except TimeoutError:  # nats-py raises asyncio's (the builtin) or its own subclass of it
            continue
        for msg in msgs:
            pending = json.loads(msg.data)
            uid = pending["uid"]
            n = widened.get(uid, 0) + 1
            widened[uid] = n
            nominated = choose(pending["clusters"], prices, n)
            subject = msg.subject.replace(".mk.pending.", ".mk.nominate.", 1)
            await js.publish(subject, json.dumps({"clusters": nominated, "uid": uid}).encode(),
                             headers={"Nats-Msg-Id": f"cheapest:{uid}:{n}"})
            print(f"{pending['namespace']}/{pending['name']} -> {nominated}", flush=True)
            await msg.ack()
    await nc.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nats", default="nats://127.0.0.1:4222")
    p.add_argument("--prices", default="", help="cluster=price,... (cheapest first)")
    p.add_argument("--durable", default="cheapest-region")
    args = p.parse_args()
    asyncio.run(run(args.nats, parse_prices(args.prices), args.durable))


if __name__ == "__main__":
    main()
