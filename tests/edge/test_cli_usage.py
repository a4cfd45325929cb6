"""Every usage error of every `agentscope-ctx` subcommand exits 2 with one line on stderr that
says what is wrong, and does nothing (issue 31: a WORKING_DIR that is no directory exited 1 in
`inspect`, `gc` and `consolidate` but 2 in `search`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx.cli import main

# {wd}: a working dir with an expired saved output; {file}: a plain file; {missing}: no such
# path; {typo}: a config with a mistyped field; {nocfg}: no such config file.
COMMON = {
    "unknown option": (["--bogus"], "unrecognized arguments: --bogus"),
    "no such config": (["--config", "{nocfg}"], "nocfg.yaml"),
    "mistyped config field": (["--config", "{typo}"], "did you mean 'max_input_tokens'?"),
}
WORKING_DIR = {
    "WORKING_DIR is a file": (["{file}"], "is not a directory"),
    "WORKING_DIR is missing": (["{missing}"], "does not exist"),
}
TABLE: dict[str, dict[str, tuple[list[str], str]]] = {
    "demo": {
        **COMMON,
        "unknown demo": (["nope"], "unknown demo 'nope'"),
        "--working-dir is a file": (["--working-dir", "{file}"], "is not a directory"),
    },
    "inspect": {**COMMON, **WORKING_DIR, "two dirs": (["{wd}", "{wd}"], "unrecognized")},
    "gc": {
        **COMMON,
        **WORKING_DIR,
        "bad retention": (["{wd}", "--retention-days", "soon"], "--retention-days"),
    },
    "consolidate": {**COMMON, **WORKING_DIR, "no days": (["{wd}", "--days", "0"], "--days")},
    "config": {
        "unknown option": (["--bogus"], "unrecognized arguments: --bogus"),
        "an argument": (["extra"], "unrecognized arguments: extra"),
    },
    "search": {
        **{k: ([*argv, "{wd}", "token"], m) for k, (argv, m) in COMMON.items()},
        "WORKING_DIR is a file": (["{file}", "token"], "is not a directory"),
        "WORKING_DIR is missing": (["{missing}", "token"], "does not exist"),
        "no query": (["{wd}"], "QUERY is missing"),
        "bad limit": (["{wd}", "token", "--limit", "0"], "--limit"),
        "bad role": (["{wd}", "token", "--role", "robot"], "--role"),
        "bad time": (["{wd}", "token", "--since", "soon"], "--since"),
    },
    "read": {
        **{k: ([*argv, "{ref}"], m) for k, (argv, m) in COMMON.items()},
        "WORKING_DIR is a file": (["{file}", "{ref}"], "is not a directory"),
        "WORKING_DIR is missing": (["{missing}", "{ref}"], "does not exist"),
        "no ref": ([], "the following arguments are required"),
        "three refs": (["{wd}", "{ref}", "{ref}"], "expected [WORKING_DIR] REF"),
        "start line 0": (["{ref}", "--start-line", "0"], "--start-line"),
        "negative offset": (["{ref}", "--line-offset", "-1"], "--line-offset"),
        "store ref, no store": (["pg-output:0123abcd"], "give --config FILE"),
    },
}
CASES = [
    pytest.param(command, argv, message, id=f"{command}: {name}")
    for command, errors in TABLE.items()
    for name, (argv, message) in errors.items()
]


@pytest.fixture
def places(tmp_path: Path, state_dir: Path) -> dict[str, str]:
    wd = state_dir
    old = wd / "tool_result" / "old.txt"
    (tmp_path / "typo.yaml").write_text("max_input_token: 9000\n")
    return {
        "wd": str(wd),
        "ref": str(old),
        "file": str(tmp_path / "a_file"),
        "missing": str(tmp_path / "missing"),
        "typo": str(tmp_path / "typo.yaml"),
        "nocfg": str(tmp_path / "nocfg.yaml"),
    }


@pytest.mark.parametrize(("command", "argv", "message"), CASES)
def test_i31_every_usage_error_exits_2(
    command: str,
    argv: list[str],
    message: str,
    places: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([command, *(a.format(**places) for a in argv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out  # nothing shown, searched or run
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("agentscope-ctx") and ": error: " in last, captured.err
    assert message in last, captured.err
    assert "Traceback" not in captured.err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
