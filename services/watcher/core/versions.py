"""Which object states the mirror already holds: a watch event is published only when it is newer.

A list is not always one snapshot: kubesim serves later pages of a paged list from the store
as it is now (Kubernetes serves them at the first page's resourceVersion), so a list can hold
an object at a resourceVersion above the list's own. The watch that follows from the list's
resourceVersion then delivers that state again, and possibly an older one of the same object
before it. Publishing those would store a state twice (or step the mirror back), once the
stream's duplicate window no longer hides it (a slow watch, a short window).

resourceVersions are compared as integers when both are (etcd revisions, kubesim's counter);
otherwise only an equal one counts as held.
"""

from __future__ import annotations

Held = tuple[str, str]  # (uid, resourceVersion) in the mirror


def already_held(held: Held | None, uid: str, resource_version: str) -> bool:
    """True when the mirror holds this object (same uid) at this resourceVersion or a newer one."""
    if held is None or held[0] != uid:
        return False
    if held[1] == resource_version:
        return True
    try:
        return int(resource_version) < int(held[1])
    except ValueError:
        return False
