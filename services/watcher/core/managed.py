"""Which objects Kueue manages: managedJobsNamespaceSelector and manageJobsWithoutQueueName
(pkg/controller/jobframework/reconciler.go, ReconcileGenericJob's first steps).

- An object in a namespace the selector does not match is not Kueue's, queue label or not
  (ManagedJobsNamespaceSelectorAlwaysRespected, GA). Kueue's default selector leaves out
  kube-system and Kueue's own namespace.
- Without a queue name an object is Kueue's only with manageJobsWithoutQueueName, and only when
  it is top-level: its controller is not of a kind Kueue integrates (a JobSet's Jobs, a RayJob's
  RayCluster and submitter Job run under their parent's Workload).
- The default LocalQueue is the webhook's part (the queue-name label is set at creation).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kq.api.meta import LabelSelector, LabelSelectorRequirement, ObjectMeta, selector_matches

NAME_LABEL = "kubernetes.io/metadata.name"
# Controllers whose children run under the parent's Workload (or are queued pod by pod, for ReplicaSets
# and StatefulSets through their template's labels).
PARENT_KINDS = frozenset(("Job", "JobSet", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob",
                          "RayJob", "RayCluster", "RayService", "ReplicaSet", "StatefulSet", "LeaderWorkerSet",
                          "Deployment", "AppWrapper", "TrainJob"))


class JobPolicy(msgspec.Struct, frozen=True, kw_only=True):
    manage_without_queue_name: bool = False
    namespace_selector: LabelSelector = LabelSelector()


def default_selector(kueue_namespace: str) -> LabelSelector:
    return LabelSelector(match_expressions=(LabelSelectorRequirement(
        key=NAME_LABEL, operator="NotIn", values=("kube-system", kueue_namespace)),))


def namespace_managed(policy: JobPolicy, namespace: str, labels: Mapping[str, str] | None) -> bool:
    """`labels`: the Namespace's (None when not known yet: its name label only, as the API server sets it)."""
    return selector_matches(policy.namespace_selector, {NAME_LABEL: namespace, **(labels or {})})


def top_level(meta: ObjectMeta) -> bool:
    ref = meta.controller_ref()
    return ref is None or ref.kind not in PARENT_KINDS


def manages_unlabelled(policy: JobPolicy, meta: ObjectMeta) -> bool:
    """An object without a queue name is Kueue's (its namespace already matched)."""
    return policy.manage_without_queue_name and top_level(meta)
