"""The import graph with the type-checking imports counted too (the pyproject contracts
exclude them, and import-linter takes that choice once for all its contracts): the core names
no package above it, and no import circle runs through the packages listed here."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import grimp
import pytest

ROOT = "agentscope_ctx"

# Every package whose circles are gone; agentscope2 and demo join when theirs are
# (docs/contributors/architecture.md).
ACYCLIC = [
    f"{ROOT}.core",
    f"{ROOT}.stores",
    f"{ROOT}.recall",
    f"{ROOT}.memory",
    f"{ROOT}.models",
    f"{ROOT}.services",
    f"{ROOT}.telemetry",
    f"{ROOT}.agentscope1",
    f"{ROOT}.cli",
    f"{ROOT}.viewer",
    f"{ROOT}._agent_config",
    f"{ROOT}.agentscope2",
    f"{ROOT}.demo",
    ROOT,  # and so nowhere in the package
]


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    graph = grimp.build_graph(ROOT, exclude_type_checking_imports=False, cache_dir=None)
    return {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m.startswith(ROOT)}
        for module in graph.modules
        if module.startswith(ROOT)
    }


def circles(imports: Mapping[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected parts of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(imports):
        if start in index:
            continue
        work = [(start, iter(sorted(imports[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    yield sorted(part)


def test_circles_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert list(circles(graph)) == [["a", "b", "c"]]
    assert list(circles({"a": {"b"}, "b": set()})) == []


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_circle_runs_through(imports: dict[str, set[str]], package: str) -> None:
    inside = [
        part
        for part in circles(imports)
        if any(m == package or m.startswith(package + ".") for m in part)
    ]
    assert inside == []


def test_the_core_names_nothing_above_it(imports: dict[str, set[str]]) -> None:
    """Not the stores' seams either: the protocols the core takes are its own (`core._seams`,
    `core.ladder._tool_policy`). Below the core: telemetry; `_line`'s `IS_1X` is named for mypy's
    per-line run only, under `TYPE_CHECKING` (the core-pure contract forbids it at run time)."""
    core = f"{ROOT}.core"
    allowed = (f"{core}.", f"{ROOT}.telemetry", f"{ROOT}._line")
    above = sorted(
        (module, imported)
        for module, targets in imports.items()
        if module.startswith(f"{core}.")
        for imported in targets
        if not imported.startswith(allowed)
    )
    assert above == []
