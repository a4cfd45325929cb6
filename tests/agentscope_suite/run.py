"""Run AgentScope 2.x's own tests with and without a `ContextManager` on every `Agent`.

    python -m tests.agentscope_suite.run --source /path/to/agentscope        # a git checkout

runs the selected test files of ``<source>/tests`` twice against the installed AgentScope
(once plainly, once with `plugin.py` loaded), prints passed/failed per file for both runs,
and lists every test that passes without agentscope_ctx and fails with it. Each such test
must be in `EXPECTED` (with the reason it differs by design, or the issue that fixes it);
the exit status is 1 when one is not, or when an expected one passes now (drop it).

The tests are AgentScope's, read from the checkout: nothing of them is copied here. The
PyPI sdist of AgentScope 2.0.11 ships no ``tests/`` (only four end-to-end files), so the
checkout comes from git. The run needs AgentScope's test extras beside the package
(`apscheduler`, `fastapi`, `fakeredis`, `sqlalchemy[asyncio]`, `aiosqlite`, `qdrant-client`,
...; see docs/contributors/agentscope2.md §10).
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SELECTION = [
    "agent_*_test.py",
    "middleware*_test.py",
    "tool_middleware_test.py",
    "compress_context_test.py",
    "compress_tool_result_test.py",
    "toolkit*_test.py",
    "hitl_*_test.py",
    "workspace_local_test.py",
    "storage_*_test.py",
    "tracing_test.py",
    "service_agent_interrupt_test.py",
    "team_member_middleware_test.py",
]
"""The files run by default (AgentScope's names, globbed in ``<source>/tests``)."""

FORMAT = "format: checks the built-in compression's own output, which agentscope_ctx replaces"
CHAIN = "middleware chain: counts AgentScope's own compression or the events of the chain"
USER_TURN = "the current user turn never leaves the prompt (DESIGN §13), so nothing is compacted"

EXPECTED: dict[str, str] = {
    # -- compress_context_test.py ----------------------------------------------------------
    "compress_context_test.py::ContextCompressionTest::test_context_compression": (
        f"{FORMAT} (summary_template text from generate_structured_output)"
    ),
    "compress_context_test.py::ContextCompressionTest::"
    "test_context_compression_injects_instructions_as_hint": (
        f"{FORMAT} (expects one generate_structured_output call; our Compactor writes the "
        "summary, the instructions go to it as extra_instruction)"
    ),
    "compress_context_test.py::ContextCompressionTest::"
    "test_context_compression_overflow_retry_keeps_instructions": (
        f"{FORMAT} (expects generate_structured_output retries)"
    ),
    "compress_context_test.py::ContextCompressionTest::test_summary_failure_truncates_context": (
        f"{FORMAT} (its fallback summary text; ours is the extractive summary, nothing dropped)"
    ),
    "compress_context_test.py::ContextCompressionTest::test_offload_reminder_is_not_duplicated": (
        f"{FORMAT} (the exact summary text; the reminder itself is appended once: "
        "tests/agentscope2/test_workspace.py)"
    ),
    "compress_context_test.py::ContextCompressionTest::test_max_image_num_default": (
        "by design: AgentScope without an offloader drops the oldest image ('is removed to "
        "free up context space'); we save it and name the file ('is offloaded into <path>'). "
        "The cap itself holds (tests/agentscope2/test_workspace.py)"
    ),
    "compress_context_test.py::ContextCompressionTest::test_max_image_num_without_offloader": (
        "by design: as test_max_image_num_default (the image is kept, not dropped)"
    ),
    # -- workspace_local_test.py -----------------------------------------------------------
    "workspace_local_test.py::TestLocalWorkspaceWithAgent::test_offload_tool_result": (
        f"{FORMAT} (tool_result_limit=50: AgentScope keeps 200 characters and offloads the "
        "rest; we cut losslessly with our notice and copy the WHOLE output to the same "
        "workspace file sessions/<id>/tool_result-<call id>.txt)"
    ),
    "workspace_local_test.py::TestLocalWorkspaceWithAgent::test_offload_context": (
        f"{USER_TURN}; with more than the current turn to compact, the compacted messages "
        "go to the same sessions/<id>/context.jsonl (tests/agentscope2/test_workspace.py)"
    ),
    # -- middleware_test.py ----------------------------------------------------------------
    "middleware_test.py::TestMiddleware::test_on_compress_context_middleware": CHAIN,
    "middleware_test.py::TestMiddleware::test_on_compress_context_middleware_modify_instructions": (
        CHAIN
    ),
    "middleware_test.py::TestMiddleware::test_on_compress_context_no_middleware": CHAIN,
    "middleware_test.py::TestMiddleware::test_multiple_middleware_types": (
        "middleware chain: it checks the exact log of every middleware call; to count the "
        "prompt, ours reads the system prompt through the agent before each pipeline run, "
        "which runs the on_system_prompt middlewares once more"
    ),
}
"""Tests that pass without agentscope_ctx and fail with it, and why."""


def _files(tests: Path, patterns: list[str]) -> list[str]:
    found: set[str] = set()
    for pattern in patterns:
        found.update(p.name for p in tests.glob(pattern))
    return sorted(found)


def _run(python: str, tests: Path, files: list[str], *, attached: bool) -> dict[str, str]:
    """Outcome ("passed", "failed", "skipped") by test id."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
        cmd += ["-n", "0"] if _has_xdist(python) else []
        cmd += [f"--junitxml={report}", *files]
        if attached:
            cmd += ["-p", "tests.agentscope_suite.plugin"]
        env = dict(os.environ)
        if attached:  # this repository first: its agentscope_ctx and the plugin
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        run = subprocess.run(cmd, cwd=tests, env=env, capture_output=True, text=True, check=False)
        if not report.exists():
            raise SystemExit(f"pytest wrote no report:\n{run.stdout}\n{run.stderr}")
        return _outcomes(report, set(files))


@functools.cache
def _has_xdist(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import xdist"], capture_output=True, check=False)
    return probe.returncode == 0


def _outcomes(report: Path, files: set[str]) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")  # e.g. tests.<module>.<Class>
        at = next((i for i, p in enumerate(parts) if f"{p}.py" in files), 0)
        test_id = "::".join([f"{parts[at]}.py", *parts[at + 1 :], case.get("name", "")])
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[test_id] = "failed"
        elif case.find("skipped") is not None:
            outcomes[test_id] = "skipped"
        else:
            outcomes[test_id] = "passed"
    return outcomes


def _table(without: dict[str, str], with_: dict[str, str]) -> list[str]:
    files = sorted({t.split("::")[0] for t in [*without, *with_]})
    lines = [f"{'file':44} {'without':>15} {'with':>15}"]
    totals: dict[str, Counter[str]] = {"without": Counter(), "with": Counter()}
    for file in files:
        row = []
        for name, outcomes in (("without", without), ("with", with_)):
            counts = Counter(v for t, v in outcomes.items() if t.split("::")[0] == file)
            totals[name].update(counts)
            row.append(f"{counts['passed']:>5} ok {counts['failed']:>3} fail")
        lines.append(f"{file:44} {row[0]:>15} {row[1]:>15}")
    row = [f"{totals[n]['passed']:>5} ok {totals[n]['failed']:>3} fail" for n in totals]
    lines.append(f"{'total':44} {row[0]:>15} {row[1]:>15}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, type=Path, help="AgentScope checkout")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run pytest")
    parser.add_argument("patterns", nargs="*", default=SELECTION, help="test files (globs)")
    args = parser.parse_args(argv)
    tests = args.source / "tests"
    files = _files(tests, args.patterns)
    if not files:
        parser.error(f"no test files matching {args.patterns} in {tests}")
    without = _run(args.python, tests, files, attached=False)
    with_ = _run(args.python, tests, files, attached=True)
    print("\n".join(_table(without, with_)))
    broken = sorted(t for t, v in with_.items() if v == "failed" and without.get(t) == "passed")
    fixed = sorted(t for t, v in with_.items() if v == "passed" and without.get(t) == "failed")
    unexpected = [t for t in broken if t not in EXPECTED]
    stale = [t for t in EXPECTED if with_.get(t) == "passed"]
    print(f"\npass without agentscope_ctx, fail with it: {len(broken)}")
    for test in broken:
        print(f"  {test}\n      {EXPECTED.get(test, 'UNEXPECTED')}")
    if fixed:
        print(f"\nfail without, pass with: {len(fixed)}")
        for test in fixed:
            print(f"  {test}")
    if stale:
        print("\nexpected to fail but passed (drop from EXPECTED):")
        for test in stale:
            print(f"  {test}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
