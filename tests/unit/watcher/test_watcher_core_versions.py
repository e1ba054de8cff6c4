"""A watch event is published only when the mirror does not already hold that state or a newer one."""

from __future__ import annotations

import pytest

from services.watcher.core.versions import already_held


@pytest.mark.parametrize("held, uid, rv, want", [
    pytest.param(None, "u1", "7", False, id="never-seen"),
    pytest.param(("u1", "7"), "u1", "7", True, id="same-state"),
    pytest.param(("u1", "9"), "u1", "7", True, id="older-state-after-a-newer-list-page"),
    pytest.param(("u1", "7"), "u1", "9", False, id="newer-state"),
    pytest.param(("u0", "9"), "u1", "7", False, id="recreated-under-the-same-name"),
    pytest.param(("u1", "abc"), "u1", "abd", False, id="opaque-versions-only-equal-counts"),
    pytest.param(("u1", "abc"), "u1", "abc", True, id="opaque-equal"),
])
def test_already_held(held: tuple[str, str] | None, uid: str, rv: str, want: bool) -> None:
    assert already_held(held, uid, rv) is want
