"""The object history: every committed change of chosen resources, in commit order, as JSON lines.

    {"c": cluster, "rv": resourceVersion, "t": unix time, "e": ADDED|MODIFIED|DELETED, "r": resource, "o": object}

An API server's watch history is a window (410 Gone past it) and its watches can be cut; this
is the whole of it, for checkers that must see every instant of a run (`kq chaos`). The stored
object's bytes are already encoded, so a record costs one buffered write. One journal serves
every cluster of the process: the file order is the order of the changes across clusters.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path

# What a checker of quota and placement needs; everything else is noise (and disk).
DEFAULT_RESOURCES = frozenset({
    "workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io", "jobs.batch", "pods", "workloadpriorityclasses.kueue.x-k8s.io",
    "admissionchecks.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io",
})


class Journal:
    def __init__(self, path: str | Path, resources: Collection[str] | None = DEFAULT_RESOURCES) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.resources = frozenset(resources) if resources is not None else None
        self._out = open(self.path, "ab", buffering=1 << 20)  # noqa: SIM115  # held open for the run
        self.records = 0

    def record(self, cluster: str, rv: int, etype: str, resource: str, raw: bytes) -> None:
        if self.resources is not None and resource not in self.resources:
            return
        self._out.write(b'{"c":"%s","rv":%d,"t":%.4f,"e":"%s","r":"%s","o":%s}\n'
                        % (cluster.encode(), rv, time.time(), etype.encode(), resource.encode(), raw))
        self.records += 1

    def flush(self) -> None:
        if not self._out.closed:
            self._out.flush()

    def close(self) -> None:
        if not self._out.closed:
            self._out.close()
