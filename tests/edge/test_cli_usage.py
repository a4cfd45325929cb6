"""Every usage error of every `agentscope-ctx` subcommand exits 2 with one line on stderr that
says what is wrong, and does nothing (issue 31: a WORKING_DIR that is no directory exited 1 in
`inspect`, `gc` and `consolidate` but 2 in `search`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentscope_ctx.cli import main
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.services._breakdown import PART_LABELS, ContextBreakdown
from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.stores._usage_file import write_usage
from agentscope_ctx.stores.factory import open_backend
from tests.fleet.conftest import pg_password, pg_schema, pg_server, pg_store  # noqa: F401
from tests.fleet.pg_config import PgStore, config_file

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
        # issue 48: was "unrecognized arguments: token" (the option split WORKING_DIR and QUERY)
        "bad limit before QUERY": (["{wd}", "--limit", "50", "token"], "--limit must be from 1"),
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
    "forget": {
        **{k: ([*argv, "{wd}", "--user", "u"], m) for k, (argv, m) in COMMON.items()},
        **{k: ([*argv, "--user", "u"], m) for k, (argv, m) in WORKING_DIR.items()},
        "no tenant": (["{wd}"], "give at least one of user, agent, session"),
        "no session alone": (["{wd}", "--session="], "needs an agent or a user"),
        "empty agent": (["{wd}", "--agent="], "agent must be a non-empty name"),
    },
    "export": {
        **{k: ([*argv, "{wd}", "--session", "s"], m) for k, (argv, m) in COMMON.items()},
        **{k: ([*argv, "--session", "s"], m) for k, (argv, m) in WORKING_DIR.items()},
        "no session": (["{wd}"], "the following arguments are required: --session"),
        "bad format": (["{wd}", "--session", "s", "--format", "pdf"], "invalid choice: 'pdf'"),
    },
    "import": {
        **{k: ([*argv, "{ref}"], m) for k, (argv, m) in COMMON.items()},
        "no file": ([], "the following arguments are required: FILE"),
        "not an archive": (["{ref}", "--working-dir", "{wd}"], "not a session archive"),
        "--working-dir is a file": (["{ref}", "--working-dir", "{file}"], "is not a directory"),
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


# -- issue 48: arguments as a user types them, each with its exit code ------------------------

# {wd}: a working dir whose steps are of session s-42 only; the current directory holds a demo
# run (agentscope_ctx_demo/) and ~/.agentscope_ctx holds nothing. The text is looked for in
# stdout (exit 0) or in the error line; a --json row's stdout must be one JSON object.
RUNS: dict[str, tuple[list[str], int, str]] = {
    "search: --json between WORKING_DIR and QUERY": (
        ["search", "{wd}", "--json", "token"],
        0,
        '"query": "token"',
    ),
    "search: --limit between WORKING_DIR and QUERY": (
        ["search", "{wd}", "--limit", "3", "deploy"],
        0,
        "1 hit for 'deploy'",
    ),
    "read: a ref as the demo's report prints it": (["read", "tool_result/seen.txt"], 0, "quokka"),
    "forget: --dry-run --json, nothing of that user": (
        ["forget", "{wd}", "--user", "nobody", "--dry-run", "--json"],
        0,
        '"deleted": null',
    ),
    "forget: a session's steps, what it will delete, then what it deleted": (
        ["forget", "{wd}", "--agent", "a1", "--session", "s-42"],
        0,
        "will delete:\n  steps               1",
    ),
    "gc: --json, what was removed": (["gc", "{wd}", "--json"], 0, '"outputs": 1'),
    "export: --json, a session's steps": (
        ["export", "{wd}", "--session", "s-42", "-o", "s.jsonl", "--json"],
        0,
        '"steps": 1',
    ),
    "export: a session with no records": (
        ["export", "{wd}", "--session", "s-0"],
        1,
        "no records of session 's-0' in {wd}",
    ),
    "import: a file that does not exist": (
        ["import", "nothing.jsonl", "--working-dir", "{wd}"],
        1,
        "'nothing.jsonl' does not exist",
    ),
    "inspect: what is in an agent's context after its last reply": (
        ["inspect", "{wd}"],
        0,
        "    cut outputs (1)                            569   7.3%\n"
        "    masked outputs (2)                         362   4.7%\n"
        "    total                                    2,499  32.2% (2,574 as the provider counts)\n"
        "    free below the trigger (6,000)           3,426\n",
    ),
    "inspect: --json, the breakdown in the usage record": (
        ["inspect", "{wd}", "--json"],
        0,
        '"free_below_budget": 5426',
    ),
    "view: no --session, the store's sessions named": (
        ["view", "{wd}"],
        1,
        "session 'default' (no --session given) in {wd}; its sessions with recorded steps: s-42",
    ),
}


@pytest.fixture
def user_places(
    places: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    StepFile(Path(places["wd"])).append({"session": "s-42", "agent": "a1", "call": 1})
    context = ContextBreakdown(
        **dict(zip(PART_LABELS, (40, 700, 0, 600, 200, 0, 28, 569, 362), strict=True)),
        scale=1.03,
        threshold=6_000,
        budget=8_000,
        messages={"pinned": 0, "recent": 5, "cut_outputs": 1, "masked_outputs": 2},
    )
    usage = {"prompt_tokens": context.total, "max_input_tokens": 8_000}
    write_usage(Path(places["wd"]), "a2", {**usage, "context": context.to_dict()}, session="s-9")
    demo = tmp_path / "agentscope_ctx_demo" / "tool_result"
    demo.mkdir(parents=True)
    (demo / "seen.txt").write_text("the quokka report\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return places


@pytest.mark.parametrize(
    ("argv", "code", "text"), [pytest.param(*v, id=k) for k, v in RUNS.items()]
)
def test_i48_commands_as_typed(
    argv: list[str],
    code: int,
    text: str,
    user_places: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([a.format(**user_places) for a in argv]) == code, capsys.readouterr()
    out, err = capsys.readouterr()
    expected = text.format(**user_places)
    if code == 0:
        assert expected in out, out
        if "--json" in argv:  # one JSON object (search: with its hits)
            key = {"search": "hits", "gc": "removed", "export": "counts"}.get(argv[0], "store")
            assert json.loads(out)[key], out
    else:
        assert out == "" and expected in err.strip().splitlines()[-1], err
    assert "Traceback" not in err


def test_i48_view_on_the_fleet_store_names_it_and_its_sessions(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "no recorded steps or dialog for session 'default' in <working dir>", a
    working dir the fleet store does not use, and not a word of the sessions it has."""
    store: PgStore = request.getfixturevalue("pg_store")  # the fleet tests' (imported)
    work = tmp_path / "w"
    path = config_file(tmp_path / "fleet.yaml", work, store.fields())
    backend = open_backend(ContextConfig.from_yaml(path))
    try:
        assert backend.steps is not None
        for session in ("s-42", "s-7"):
            backend.steps.append({"session": session, "agent": "a1", "call": 1})
    finally:
        backend.close()
    assert main(["view", "--config", str(path)]) == 1
    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert f"in the fleet store (schema {store.schema})" in line, line
    assert "its sessions with recorded steps: s-42, s-7 (pass one as --session ID)" in line
    assert str(work) not in line and store.password not in line
    assert not work.exists()  # nothing written to a working dir the store does not use
