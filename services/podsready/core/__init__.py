"""The all-or-nothing timer core (Kueue's waitForPodsReady, KEP-349): pure and deterministic.

Given what a Workload's status says (admitted since when, its PodsReady condition, its
requeue state), the configuration and `now`, it decides which deadline to watch and,
once the deadline has passed, the eviction (PodsReadyTimeout, with the next requeue state)
or the deactivation (RequeuingLimitExceeded); after a PodsReadyTimeout eviction it watches
the requeue backoff and ends it (Requeued=True, BackoffFinished). No clock, no I/O: the
shell passes `now` and carries out timers and decisions.
"""
