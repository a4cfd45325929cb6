"""`agentscope-ctx read` follows what the CLI and the notices print; `--json` on `inspect` and
`search`; `--version`; help for the installed line (issue 31, the CLI items)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentscope_ctx
from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X
from agentscope_ctx.cli import main
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._tool_results import ToolResultStore
from tests.support.lines import Msg

SMALL = "tool_result:\n  recent_max_bytes: 1024\n  old_max_bytes: 1024\n"
"""A config whose reads are cut at 1 KB: long chains from short texts."""


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _read_on(out: str) -> list[str] | None:
    """The `agentscope-ctx read ...` command a read's last line gives, as argv (no program)."""
    last = out.rstrip("\n").rsplit("\n", 1)[-1]
    if "; read on: agentscope-ctx read " not in last:
        return None
    return shlex.split(last.split("; read on: ", 1)[1].removesuffix(")"))[2:]


@pytest.fixture(scope="module")
def small_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "small.yaml"
    path.write_text(SMALL, encoding="utf-8")
    return path


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=3000)
    | st.lists(st.sampled_from(["x" * 700, "日本語🙂", "a\r\n", "\n", "line\n"]), max_size=12).map(
        "".join
    )
)
@example(text="y" * 5000)  # one line far over the excerpt: --line-offset
@example(text="🙂" * 900 + "\nend")  # four-byte characters across a cut, no final newline
@example(text="")
@example(text="\x00")  # a saved output is text, whatever working dir the config names
def test_i31_following_the_printed_command_gives_the_text_back(
    text: str, tmp_path: Path, small_config: Path
) -> None:
    """Run `read`, then each command it prints, until none: the excerpts are the file."""
    saved = ToolResultStore(tmp_path / "wd", 7.0).save(text)
    argv: list[str] | None = ["read", str(saved), "--config", str(small_config)]
    pieces: list[str] = []
    for _ in range(len(text.encode()) + 2):
        assert argv is not None
        code, out, err = _run(argv)
        assert code == 0 and err == "", err
        argv = _read_on(out)
        if argv is None:
            pieces.append(out)
            break
        assert argv[:1] == [str(saved)] and "--config" in argv
        excerpt = out.rstrip("\n").rsplit("\n", 1)[0] + "\n"
        ends_inside_a_line = "--line-offset" in argv
        pieces.append(excerpt[:-1] if ends_inside_a_line else excerpt)
        argv = ["read", *argv]
    else:
        pytest.fail("the chain did not end")
    whole = "".join(pieces)
    if not text:
        assert "is empty" in whole
    else:  # the last excerpt is printed ending with one newline
        assert whole == (text if text.endswith("\n") else text + "\n")


@pytest.fixture
def working_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A working dir with one dialog message and one saved output."""
    wd = tmp_path / "wd"
    msg = Msg("user", "the quokka report is due on friday", "user")
    asyncio.run(DialogStore(wd, record_fields={"agent": "a1"}).append([msg]))
    lines = [f"line {n}" for n in range(1, 400)]
    lines[300] = "ERROR: the wombat daemon crashed"
    saved = ToolResultStore(wd, 7.0).save("\n".join(lines) + "\n")
    return wd, saved


@pytest.mark.parametrize(
    ("word", "shown"),
    [("wombat", "line 300\nERROR: the wombat daemon"), ("quokka", "the quokka report")],
)
def test_i31_a_hit_says_how_to_read_on_and_that_runs(
    word: str, shown: str, working_dir: tuple[Path, Path]
) -> None:
    """Before: ``read on: read_file file_path=... start_line=N``, which no shell runs."""
    wd, _ = working_dir
    code, out, _ = _run(["search", str(wd), word])
    assert code == 0 and "read_file file_path=" not in out, out
    command = next(line for line in out.splitlines() if "read on: " in line)
    argv = shlex.split(command.split("read on: ", 1)[1])
    assert argv[:2] == ["agentscope-ctx", "read"]
    code, out, err = _run(argv[1:])
    assert code == 0 and err == ""
    assert out.startswith(shown), out[:300]  # the excerpt starts where the hit is shown


def test_i31_search_json(working_dir: tuple[Path, Path]) -> None:
    wd, saved = working_dir
    code, out, _ = _run(["search", str(wd), "wombat", "--json"])
    assert code == 0
    found = json.loads(out)
    assert found["version"] == 1 and found["query"] == "wombat" and found["complete"] is True
    assert found["searched"].startswith(str(wd.resolve()))
    assert found["scope"] == {"agent": None, "session": None}
    [hit] = found["hits"]
    assert hit["kind"] == "tool_result" and hit["ref"] == str(saved)
    assert hit["start_line"] == 300 and hit["line_offset"] == 0  # from the line shown before
    assert {"line": 301, "text": "ERROR: the wombat daemon crashed"} in hit["lines"]
    assert hit["read"] == f"agentscope-ctx read {saved} --start-line 300"
    code, out, _ = _run(["search", str(wd), "numbat", "--agent", "a1", "--json"])
    assert json.loads(out)["hits"] == [] and json.loads(out)["scope"]["agent"] == "a1"


def test_i31_search_without_hits_says_where_it_searched(working_dir: tuple[Path, Path]) -> None:
    wd, _ = working_dir
    code, out, _ = _run(["search", str(wd), "numbat", "--agent", "a1", "--session", "s9"])
    assert code == 0
    assert "No hits for 'numbat' in the history of agent 'a1', session 's9'" in out, out
    assert f"({wd.resolve()}: dialog/, tool_result/, memory/)" in out, out


def test_i31_inspect_json(working_dir: tuple[Path, Path]) -> None:
    wd, saved = working_dir
    code, out, _ = _run(["inspect", str(wd), "--json"])
    assert code == 0
    facts = json.loads(out)
    assert facts["version"] == 1 and facts["working_dir"] == str(wd.resolve())
    assert facts["store"] == {"kind": "local"}
    assert facts["dialog"]["messages"] == 1 and sum(facts["dialog"]["days"].values()) == 1
    assert facts["dialog"]["bad_lines"] == []
    assert facts["outputs"]["count"] == 1
    assert facts["outputs"]["bytes"] == saved.stat().st_size
    assert facts["memory"] == [] and facts["usage"] == []
    text = _run(["inspect", str(wd)])[1]  # the text says the same
    assert f"working dir: {wd.resolve()}" in text and "dialog/: 1 messages" in text


def test_i31_version_names_the_package_and_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    line = "1.x" if IS_1X else "2.x"
    expected = f"agentscope-ctx {agentscope_ctx.__version__} (AgentScope {AGENTSCOPE_VERSION}"
    out = capsys.readouterr().out
    assert out.startswith(expected) and f"the {line} line" in out, out


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"]])
def test_i31_help_speaks_of_the_installed_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    if IS_1X:
        assert "ReActAgent" in out
    else:
        assert "ReActAgent" not in out
        assert ("its Agent" if argv == ["--help"] else "a real Agent") in out, out


def test_i31_the_agent_config_speaks_of_the_default_line() -> None:
    """`configs/agent.yaml` began "A ReActAgent with ...", which 2.x (the default) does not
    build."""
    root = Path(__file__).resolve().parents[2]
    head = (root / "configs" / "agent.yaml").read_text(encoding="utf-8").split("\n\n", 1)[0]
    assert not head.startswith("# A ReActAgent")
    assert "2.x, the default: an\n# `Agent`" in head and "1.x: a `ReActAgent`" in head


def test_i31_read_a_relative_ref_in_a_working_dir(
    working_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`read WORKING_DIR tool_result/NAME`: a relative ref is looked up in the working dir
    (then here), as the agent's read_file looks it up in its roots."""
    wd, saved = working_dir
    monkeypatch.chdir(tmp_path)
    ref = f"tool_result/{saved.name}"
    code, out, err = _run(["read", str(wd), ref, "--start-line", "399"])
    assert (code, out, err) == (0, "line 399\n", "")
    code, out, err = _run(["read", ref])  # not here, not in ~/.agentscope_ctx
    assert code == 1 and out == "" and "does not exist" in err
