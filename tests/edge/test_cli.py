"""`agentscope-ctx` commands: exit codes, one-line errors, and a demo's working dir."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import pytest

import agentscope_ctx
from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from tests.support.demo_rungs import DemoRun
from tests.support.forked import Forker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory, logs_demo: DemoRun) -> Path:
    """A copy of the process's run of the default demo (``logs_demo``: `demo logs` makes the
    same), which the tests here change (gc, consolidate): one run less per test process."""
    path = tmp_path_factory.mktemp("demo") / "logs"
    shutil.copytree(logs_demo.path, path)
    return path


def _one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("agentscope-ctx: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["demo", "--help"],
        ["inspect", "--help"],
        ["gc", "--help"],
        ["consolidate", "--help"],
        ["config", "--help"],
    ],
)
def test_help_exits_0(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert "usage: agentscope-ctx" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["gc", "--retention-days", "soon"],
        ["inspect", "a", "b"],
        ["consolidate", "--days", "0"],
        ["demo", "nope"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_inspect_a_demo_dir(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(demo_dir)]) == 0
    out = capsys.readouterr().out
    assert "dialog/:" in out and "messages" in out
    assert "tool_result/:" in out and "memory/: 1 file(s)" in out


def test_gc_deletes_only_expired_files(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted((demo_dir / "tool_result").glob("*.txt"))
    assert len(files) >= 2
    old = time.time() - 30 * 86_400
    os.utime(files[0], (old, old))
    assert main(["gc", str(demo_dir)]) == 0
    assert "removed 1 tool_result file(s)" in capsys.readouterr().out
    assert not files[0].exists() and all(f.exists() for f in files[1:])


def test_consolidate_merges_the_demo_notes(
    demo_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["consolidate", str(demo_dir)]) == 0
    assert "merged 1 daily note(s)" in capsys.readouterr().out
    assert "Disk quota exceeded" in (demo_dir / "memory" / "MEMORY.md").read_text()
    assert main(["consolidate", str(demo_dir)]) == 0
    assert "nothing new" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["inspect", "gc", "consolidate"])
def test_corrupt_working_dirs_exit_1(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory that is no working dir is a runtime failure (a WORKING_DIR that is no
    directory at all is a usage error: tests/edge/test_cli_usage.py)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([command, str(empty)]) == 1
    assert "no agentscope_ctx state" in _one_line_error(capsys.readouterr().err)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "dialog").write_text("not a dir")
    assert main([command, str(broken)]) == 1
    assert "corrupt" in _one_line_error(capsys.readouterr().err)


def test_inspect_reports_corrupt_dialog_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dialog").mkdir()
    (tmp_path / "dialog" / "2026-12-01.jsonl").write_text("{not json\n")
    assert main(["inspect", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "dialog/:" in captured.out
    assert "corrupt" in _one_line_error(captured.err)


def test_bad_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_input_tokens: 5\n")
    assert main(["gc", "--config", str(bad)]) == 2
    assert "max_input_tokens" in _one_line_error(capsys.readouterr().err)


def test_console_script_entry_point(forker: Forker, tmp_path: Path) -> None:
    done = forker.run(["-m", "agentscope_ctx.cli", "inspect", str(tmp_path)], cwd=ROOT)
    assert done.returncode == 1
    _one_line_error(done.stderr)


def test_i11_16_inspect_after_demo_finds_the_demo_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.agentscope_ctx
    assert main(["inspect"]) == 1
    err = _one_line_error(capsys.readouterr().err)
    assert ".agentscope_ctx" in err and "WORKING_DIR" in err and "agentscope-ctx demo" in err
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    first = tmp_path / "agentscope_ctx_demo"
    assert f"working dir: {first}" in out and (first / "report.svg").exists()
    # the report is in the demo folder too, not on stdout only (issue 31 item 6)
    text = (first / "report.txt").read_text(encoding="utf-8")
    assert text.startswith("=== report: demo 'logs' ===") and text in out
    assert re.search(rf"this report +{re.escape(str(first / 'report.txt'))}\n", text), text
    assert main(["inspect"]) == 0
    out = capsys.readouterr().out
    assert f"working dir: {first}" in out and "dialog/:" in out
    assert main(["demo", "skills"]) == 0  # the default dir is taken: the next one beside it
    out = capsys.readouterr().out
    second = tmp_path / "agentscope_ctx_demo_2"
    assert f"working dir: {second}" in out and "=== report: demo 'skills'" in out
    assert main(["inspect"]) == 0  # the newest run
    assert f"working dir: {second}" in capsys.readouterr().out
    assert main(["gc"]) == 0  # every command alike, and it says which dir it used
    captured = capsys.readouterr()
    assert f"using the newest demo run {second}" in captured.err
    assert "removed 0 tool_result file(s)" in captured.out


def test_i11_16_default_config_ships_with_the_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tomllib = pytest.importorskip("tomllib")
    shipped = Path(agentscope_ctx.__file__).with_name("core") / "config" / "default.yaml"
    assert shipped.read_bytes() == (ROOT / "configs" / "default.yaml").read_bytes()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert (
        "core/config/default.yaml"
        in pyproject["tool"]["setuptools"]["package-data"]["agentscope_ctx"]
    )
    assert ContextConfig.default() == ContextConfig()
    assert ContextConfig.default().working_dir == Path("~/.agentscope_ctx").expanduser()
    assert main(["config"]) == 0
    copy = tmp_path / "my.yaml"
    copy.write_text(capsys.readouterr().out, encoding="utf-8")
    assert copy.read_bytes() == shipped.read_bytes()
    assert ContextConfig.from_yaml(copy) == ContextConfig()


def test_i11_16_readme_has_no_machine_paths() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w.~])/(work|root|home|tmp|Users)/", readme)
    assert "`~/.agentscope_ctx`" in readme.split("## Use it", 1)[1].split("\n## ", 1)[0]


def test_i20_demo_config_working_dir_holds_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`demo --config FILE` honours the config's working_dir: each run goes to a fresh run
    dir inside it (the working dir's own dialog/ and tool_result/ stay as they were), and
    says so; `--working-dir` wins, and says that too; a config without working_dir keeps
    the default (here)."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    state = tmp_path / "state"
    (state / "dialog").mkdir(parents=True)  # a working dir in use
    (state / "dialog" / "2026-12-01.jsonl").write_text("", encoding="utf-8")
    config = tmp_path / "ctx.yaml"
    config.write_text(f"working_dir: {state}\nmax_input_tokens: 14000\n", encoding="utf-8")
    for run in ("agentscope_ctx_demo", "agentscope_ctx_demo_2"):
        assert main(["demo", "skills", "--config", str(config)]) == 0
        out = capsys.readouterr().out
        assert f"(the run goes to {state / run}, a fresh run dir inside the config's" in out
        assert f"working dir: {state / run}" in out and (state / run / "report.svg").exists()
        assert "of 14,000 budget" in out
    assert sorted(p.name for p in state.iterdir()) == [
        "agentscope_ctx_demo",
        "agentscope_ctx_demo_2",
        "dialog",
    ]
    assert [p.name for p in (state / "dialog").iterdir()] == ["2026-12-01.jsonl"]
    assert list(here.iterdir()) == []

    elsewhere = tmp_path / "elsewhere"
    assert main(["demo", "skills", "--config", str(config), "--working-dir", str(elsewhere)]) == 0
    out = capsys.readouterr().out
    assert f"(--working-dir is used, not the config's working_dir {state})" in out
    assert f"working dir: {elsewhere}" in out

    plain = tmp_path / "plain.yaml"
    plain.write_text("max_input_tokens: 14000\n", encoding="utf-8")
    assert main(["demo", "skills", "--config", str(plain)]) == 0
    assert f"working dir: {here / 'agentscope_ctx_demo'}" in capsys.readouterr().out


# -- issue 20: usage errors show the command's usage, a closed pipe ends quietly -------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "{wd}", ""], "QUERY is empty"),
        (["search", "{wd}", "  "], "QUERY is empty"),
        (["search", "{wd}", "*"], "no words to search for"),
        (["search", "{wd}"], "QUERY is missing after WORKING_DIR"),
        (["search", "{file}", "deploy"], "is not a directory"),
        (["gc", "{wd}", "--retention-days", "nan"], "--retention-days: expected a finite"),
        (["gc", "{wd}", "--retention-days", "inf"], "--retention-days: expected a finite"),
        (["gc", "{wd}", "--retention-days", "-1"], "--retention-days: expected a finite"),
        (["gc", "{wd}", "--retention-days", "0"], "--retention-days: expected a finite"),
        (["gc", "{wd}", "extra"], "unrecognized arguments: extra"),
        (["inspect", "{wd}", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_i20_5_usage_errors_show_the_commands_usage(
    argv: list[str], message: str, state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.format(wd=state_dir, file=state_dir.parent / "a_file") for a in argv]
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing searched, nothing deleted
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith(f"usage: agentscope-ctx {argv[0]} "), captured.err
    assert lines[-1].startswith(f"agentscope-ctx {argv[0]}: error: "), captured.err
    assert message in lines[-1] and "Traceback" not in captured.err
    assert (state_dir / "tool_result" / "old.txt").exists()


def test_i20_5_a_word_that_is_no_dir_is_still_a_query(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(state_dir.parent / "home"))
    assert main(["search", str(state_dir), "deploy", "token"]) == 0
    assert "for 'deploy token'" in capsys.readouterr().out
    (state_dir.parent / "home" / ".agentscope_ctx" / "dialog").mkdir(parents=True)
    assert main(["search", "deploy", "token"]) == 0  # the default dir, as before
    assert "No hits for 'deploy token'" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv", [["--help"], ["config"], ["inspect", "{wd}"], ["search", "{wd}", "deploy"]]
)
def test_i20_5_a_closed_pipe_ends_quietly(argv: list[str], state_dir: Path, forker: Forker) -> None:
    """`agentscope-ctx ... | head -1` when head has already gone: no traceback, no error line,
    the status of a process ended by SIGPIPE. The pipe's read end is closed before the command
    writes, so every run meets the broken pipe (not only the ones that lose the race)."""
    args = [a.format(wd=state_dir) for a in argv]
    done = forker.run(["-m", "agentscope_ctx.cli", *args], cwd=ROOT, closed_stdout=True)
    assert done.stderr == ""
    # argparse itself drops what --help cannot write (and exits 0); the commands stop at 141
    assert done.returncode == (0 if argv == ["--help"] else 141)


def test_i20_5_a_missing_working_dir_is_not_searched_as_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `search ./typo foo` searched the default dir for the words './typo foo'."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".agentscope_ctx" / "dialog").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert main(["search", "./typo", "foo"]) == 2
    err = capsys.readouterr().err
    assert "WORKING_DIR './typo' does not exist" in err.splitlines()[-1]
