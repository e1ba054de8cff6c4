"""The owners of the admission core's state, handed together to the modules that coordinate them.

    tree      QueueTree       ClusterQueues, cohorts, LocalQueues, quota, epochs (tree.py)
    book      WorkloadBook    workload records: pending, reserved, assumed, backoff timers (book.py)
    ledger    IssueLedger     decisions issued once, decision ids (ledger.py)
    reporter  StatusReporter  what changed and must be reported (reporter.py)
    placements PlacementBook  questions to the topology solver and its answers (placements.py)

`now` and `cycle` are the time and number of the latest cycle; only cycle.run_cycle sets them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .book import WorkloadBook
from .ledger import DecisionIds, IssueLedger
from .model import SchedulerConfig
from .placements import PlacementBook
from .reporter import StatusReporter
from .tree import QueueTree


class Parts:
    __slots__ = ("config", "ids", "reporter", "tree", "book", "ledger", "placements", "now", "cycle", "owns")

    def __init__(self, config: SchedulerConfig, owns: Callable[[str], bool] | None = None) -> None:
        self.config = config
        self.ids = DecisionIds()
        self.reporter = StatusReporter()
        self.tree = QueueTree(self.reporter)
        self.book = WorkloadBook()
        self.ledger = IssueLedger(self.ids)
        self.placements = PlacementBook()
        self.now = -math.inf
        self.cycle = 0
        # Sharded admission (ownership.py): the cohort trees, by root name, this core decides for.
        self.owns = owns
        self.tree.owns = owns
