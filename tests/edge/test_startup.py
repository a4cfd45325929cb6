"""Start-up stays cheap (issue 20, item 3), checked by what is imported, never by the clock:
`import agentscope_ctx` and the quick CLI commands load nothing heavy beyond what
``import agentscope`` loads itself (no providers, models, openai, mcp, adapters or pydantic
configs), and every public name still imports, from the package and with ``import *``.
The times are measured by ``python -m benchmarks startup``.

Each case runs as a fresh interpreter: ``import agentscope`` first, then what is measured; the
modules it added are compared with what each case may load. The interpreters are children
forked right after ``import agentscope`` (`tests/support/forked.py`: it takes seconds on 1.x).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import agentscope_ctx
from tests.support.forked import Forker
from tests.support.lines import IS_1X, Msg

ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "openai",
    "mcp",
    "anthropic",
    "dashscope",
    "numpy",
    "agentscope.model",
    "agentscope.agent",
    "agentscope.tool",
    "agentscope.formatter",
    "agentscope_ctx.agentscope2",
    "agentscope_ctx.agentscope1._manager",
    "agentscope_ctx._providers",
    "agentscope_ctx._agent_config",
    "agentscope_ctx.services._services",
    "agentscope_ctx.core._pipeline",
    "agentscope_ctx.core.compaction._compactor",
    "agentscope_ctx.demo",
)
"""What the quick paths must not load (a module or any of its submodules)."""
CONFIG = ("pydantic", "yaml", "agentscope_ctx.core.config._config")
"""The config models: loaded only by a command given ``--config`` (and by `import agentscope`
itself on 1.x, where the difference below leaves them out)."""

_PROBE = """
import json, sys
import agentscope
before = set(sys.modules)
{body}
added = sorted(set(sys.modules) - before)
with open(sys.argv[1], "w") as out:
    json.dump({{"added": added, "code": code}}, out)
"""


def _added(forker: Forker, body: str, tmp_path: Path, *args: str) -> tuple[list[str], int]:
    """The modules `body` imports beyond `import agentscope`, and its `code`."""
    report = tmp_path / "modules.json"
    done = forker.run(
        ["-c", _PROBE.format(body=body), str(report), *args],
        cwd=tmp_path,
        env={"HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    return data["added"], data["code"]


def _loaded(added: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in added if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_i20_3_import_loads_only_the_line_check(forker: Forker, tmp_path: Path) -> None:
    added, _ = _added(forker, "import agentscope_ctx\ncode = 0", tmp_path)
    assert _loaded(added, HEAVY + CONFIG) == []
    ours = [m for m in added if m.split(".")[0] == "agentscope_ctx"]
    # the line check, the version's one line (`_version`, which pyproject reads too), and the
    # core's seam where the edge names the line's adapter (`core._host`: the adapter itself
    # loads on first use)
    assert sorted(ours) == [
        "agentscope_ctx",
        "agentscope_ctx._line",
        "agentscope_ctx._version",
        "agentscope_ctx.core",
        "agentscope_ctx.core._host",
    ]
    third_party = [
        m for m in added if m.split(".")[0] not in sys.stdlib_module_names and m not in ours
    ]
    assert third_party == [] or all(m.startswith("__editable__") for m in third_party), added


@pytest.fixture(scope="module")
def working_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small working dir written by the package's own stores."""
    from agentscope_ctx.stores._dialog import DialogStore
    from agentscope_ctx.stores._tool_results import ToolResultStore

    path = tmp_path_factory.mktemp("wd")
    asyncio.run(DialogStore(path).append([Msg("user", "where is the deploy token?", "user")]))
    ToolResultStore(path, 7.0).save("line 1 deploy\nline 2\n" * 100)
    return path


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["config"], ["inspect", "{wd}"], ["search", "{wd}", "deploy"], ["gc", "{wd}"]],
    ids=lambda argv: argv[0],
)
def test_i20_3_quick_commands_load_nothing_heavy(
    argv: list[str], working_dir: Path, forker: Forker, tmp_path: Path
) -> None:
    args = [a.format(wd=working_dir) for a in argv]
    body = "from agentscope_ctx.cli import main\ncode = main(sys.argv[2:])"
    added, code = _added(forker, body, tmp_path, *args)
    assert code == 0
    assert _loaded(added, HEAVY + CONFIG) == [], args


def test_i20_3_a_command_given_a_config_loads_it(
    working_dir: Path, forker: Forker, tmp_path: Path
) -> None:
    """The check above can fail: `--config` does load the config models."""
    (tmp_path / "my.yaml").write_text(f"working_dir: {working_dir}\n", encoding="utf-8")
    body = "from agentscope_ctx.cli import main\ncode = main(sys.argv[2:])"
    added, code = _added(forker, body, tmp_path, "inspect", "--config", str(tmp_path / "my.yaml"))
    assert code == 0
    assert "agentscope_ctx.core.config._config" in added


def test_i20_3_every_public_name_imports_lazily(forker: Forker, tmp_path: Path) -> None:
    body = (
        "import agentscope_ctx\n"
        "from agentscope_ctx import *\n"
        "names = [n for n in agentscope_ctx.__all__ if n in globals()]\n"
        "code = len(agentscope_ctx.__all__) - len(names)"
    )
    added, code = _added(forker, body, tmp_path)
    assert code == 0  # `import *` gave every name of __all__
    line = "agentscope_ctx.agentscope1._manager" if IS_1X else "agentscope_ctx.agentscope2"
    assert line in added and "agentscope_ctx._providers" in added


def test_i20_3_a_lazy_name_is_the_object_of_its_module() -> None:
    from agentscope_ctx._providers import build_model
    from agentscope_ctx.core.config._config import ContextConfig

    assert agentscope_ctx.ContextConfig is ContextConfig
    assert agentscope_ctx.build_model is build_model
    assert set(agentscope_ctx.__all__) <= set(dir(agentscope_ctx))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agentscope_ctx.nope  # noqa: B018


# Fresh interpreters by nature (it measures start-up): 0.4 s on 2.x, ~10 s on 1.x, where it runs
# under -m slow (`.ci/run` runs the slow suite on 1.x).
@(pytest.mark.slow if IS_1X else lambda test: test)
def test_i20_3_startup_bench_runs(capsys: pytest.CaptureFixture[str]) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.startup import imports as bench_startup

    result = bench_startup.main(runs=1, only=["--help"], warm=False)
    assert set(result["cases"]) == {"import agentscope", "--help"}
    assert result["cases"]["import agentscope"]["ratio"] == 1.0
    assert result["cases"]["--help"]["median_ms"] > 0
    assert "ratio = median" in capsys.readouterr().out
