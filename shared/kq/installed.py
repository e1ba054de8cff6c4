"""What this build of kq has: the services (services/<name>/ with a __main__.py), found without
importing them (kq never imports `services`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def installed_services() -> list[str]:
    """Every services/<name>/ that has a __main__.py, sorted."""
    spec = importlib.util.find_spec("services")
    if spec is None or not spec.submodule_search_locations:
        return []
    names: set[str] = set()
    for root in spec.submodule_search_locations:
        for main in Path(root).glob("*/__main__.py"):
            names.add(main.parent.name)
    return sorted(names)
