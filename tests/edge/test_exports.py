"""The public API: one sorted `__all__`, every name importable, nothing private leaked."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentscope_ctx
from tests.support.lines import IS_1X

ROOT = Path(__file__).resolve().parents[2]


def test_all_is_sorted_and_importable() -> None:
    names = agentscope_ctx.__all__
    # isort style, as ruff keeps it: CONSTANTS, then Classes, then the rest
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in names:
        assert hasattr(agentscope_ctx, name), name


def test_public_names_are_exactly_all() -> None:
    submodules = {"annotations", "cli", "demo", "tools", "viewer"}  # submodules imported by name
    submodules |= {"agentscope1", "agentscope2", "core", "memory", "models", "recall"}
    # the layers' subpackages (docs/contributors/architecture.md)
    submodules |= {"services", "stores", "telemetry"}
    submodules |= {"testing"}  # agentscope_ctx.testing, imported explicitly (its own __all__)
    listed = {n for n in dir(agentscope_ctx) if not n.startswith("_")} - submodules
    assert listed == set(agentscope_ctx.__all__) - {"__version__"}
    for name in agentscope_ctx.__all__:  # the names import on first use (issue 20)
        getattr(agentscope_ctx, name)
    public = {n for n in vars(agentscope_ctx) if not n.startswith("_")} - submodules
    assert public == set(agentscope_ctx.__all__) - {"__version__"}


ONLY_1X = ["AtomicJSONSession", "ContextMemory"]
"""Public names of the 1.x adapter (on 2.x they raise an ImportError naming the line)."""
ONLY_2X = ["ContextMiddleware", "app_middlewares", "function_tool"]
"""Public names of the 2.x adapter (on 1.x they raise an ImportError naming the line)."""


def test_design_contract_names() -> None:
    from agentscope_ctx import TRUNCATION_NOTICE_MARKER, ContextConfig  # noqa: F401

    assert TRUNCATION_NOTICE_MARKER == "<<<TRUNCATED>>>"
    if IS_1X:
        from agentscope_ctx import ContextManager, ContextMemory  # noqa: F401


def test_error_family_is_public() -> None:
    """Every exception of `_errors` is public, under the root; the usage branch holds the
    over-budget error of issue #20."""
    from agentscope_ctx.core import _errors

    for name in _errors.__all__:
        assert name in agentscope_ctx.__all__, name
        assert issubclass(getattr(agentscope_ctx, name), agentscope_ctx.ContextError)
    assert issubclass(agentscope_ctx.PromptTooLargeError, agentscope_ctx.ContextUsageError)


def test_i11_16_newcomer_names_are_public() -> None:
    names = {"build_agent", "build_model", "load_models", "ShellTool", "fetch_url"}
    from agentscope_ctx import (  # noqa: F401
        ContextManager,
        ModelConfig,
        Models,
        ShellTool,
        build_agent,
        build_model,
        fetch_url,
        load_models,
    )

    assert names | {"ContextManager"} <= set(agentscope_ctx.__all__)  # on both lines


@pytest.mark.parametrize("name", ONLY_1X + ONLY_2X)
def test_i14_one_line_names_say_which_line_they_need(name: str) -> None:
    mine = IS_1X == (name in ONLY_1X)
    if mine:
        assert name in agentscope_ctx.__all__
        return
    line, other = ("1", "2") if name in ONLY_1X else ("2", "1")
    assert name not in agentscope_ctx.__all__
    with pytest.raises(
        ImportError, match=rf"{name} needs AgentScope {line}\.x; AgentScope {other}\."
    ):
        getattr(agentscope_ctx, name)


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from agentscope_ctx... import name` and `import ...`."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentscope_ctx"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("agentscope_ctx")]
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_i11_16_examples_import_only_public_names(path: Path) -> None:
    for module, name in _imports(path):
        assert not any(part.startswith("_") for part in module.split(".")), (path.name, module)
        assert not name.startswith("_"), (path.name, module, name)
        if module == "agentscope_ctx":  # public on one line at least
            public = set(agentscope_ctx.__all__) | agentscope_ctx._MISSING
            assert name in public, (path.name, name)


def test_i11_16_core_modules_do_not_import_the_demos() -> None:
    """Only the demos themselves and the CLI (lazily, to run them) may import `demo/`."""
    package = ROOT / "agentscope_ctx"
    for path in sorted(package.rglob("*.py")):  # every layer (the modules live in subpackages)
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[1] in ("cli", "demo"):
            continue
        here = list(parts[:-1])  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module or ""]) if node.level else node.module
                assert not (module or "").startswith("agentscope_ctx.demo"), path.name
