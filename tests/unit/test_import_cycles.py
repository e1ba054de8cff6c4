"""No import cycle among the modules of any service (function-local and type-only imports count).

A cycle hides who depends on whom: every module of a cycle may reach into every other one.
grimp reads every import statement, including those under TYPE_CHECKING and inside functions.
"""

from __future__ import annotations

import grimp
import pytest

SERVICES = ("admission", "watcher", "tas", "dispatcher", "gc", "podsready")


def _cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Strongly connected components (of more than one module, or self-importing) inside `package`."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(modules)
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan; the packages are small, recursion depth is fine
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in edges[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                component.append(n)
                if n == m:
                    break
            if len(component) > 1 or m in edges[m]:
                found.append(sorted(component))

    for m in modules:
        if m not in index:
            visit(m)
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("services", "kq", include_external_packages=False)


@pytest.mark.parametrize("service", SERVICES)
def test_no_import_cycle_inside_a_service(graph: grimp.ImportGraph, service: str) -> None:
    package = f"services.{service}"
    if package not in graph.modules:
        pytest.skip(f"{package} does not exist yet")
    assert _cycles(graph, package) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert _cycles(g, "p") == [["p.a", "p.b"]]
