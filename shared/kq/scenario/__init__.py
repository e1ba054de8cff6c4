"""The scenario harness: `kq scenario run FILE [--json]` (shared/scenarios/FORMAT.md).

load (file -> Scenario, exit 2 on anything invalid or unsupported) -> run (the real stack,
the timeline) -> observe/observed (the clusters' state) -> checks (pure) -> report.
"""
