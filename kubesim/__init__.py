"""kubesim: a Kubernetes stand-in speaking the real REST and watch protocol.

One process hosts several clusters (path prefix per cluster), each with a kwok-like
cluster part (job, JobSet, scheduler, kubelet, garbage collector), a control API for
scenario hooks and faults, and a CLI (`python -m kubesim`). See kubesim/README.md.
"""

from kubesim.server import KubeSim

__all__ = ["KubeSim"]
