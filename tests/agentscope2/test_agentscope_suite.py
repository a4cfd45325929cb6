"""The harness that runs AgentScope's own tests with a `ContextManager` on every `Agent`
(`tests/agentscope_suite`), run here on a two-file stand-in for AgentScope's `tests/` (the
real ones come from a git checkout: docs/contributors/agentscope2.md §10)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel

from agentscope_ctx import ContextConfig
from agentscope_ctx.agentscope2 import ContextMiddleware
from tests.agentscope_suite import plugin, run
from tests.support.fakes import FakeChatModel

PLAIN = """
from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel

MODEL = dict(credential=OpenAICredential(api_key="k"), model="m")


def _agent():
    return Agent(name="a", system_prompt="s", model=OpenAIChatModel(**MODEL))


def test_builds_an_agent():
    assert _agent().name == "a"


def test_fails_everywhere():
    assert False
"""

ATTACHED = """
from agentscope.agent import Agent
from agentscope.credential import OpenAICredential
from agentscope.model import OpenAIChatModel

MODEL = dict(credential=OpenAICredential(api_key="k"), model="m")


def test_no_foreign_middleware():
    agent = Agent(name="a", system_prompt="s", model=OpenAIChatModel(**MODEL))
    names = [type(m).__name__ for m in agent._reasoning_middlewares]
    assert "ContextMiddleware" not in names
"""


@pytest.mark.slow  # two pytest runs in subprocesses: about 15 s of CPU
def test_the_suite_runs_with_and_without_and_names_what_broke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "plain_test.py").write_text(PLAIN)
    (tests / "attached_test.py").write_text(ATTACHED)

    status = run.main(["--source", str(tmp_path), "--python", sys.executable, "*_test.py"])

    out = capsys.readouterr().out
    assert status == 1  # a test broken by the plugin and not in EXPECTED
    assert "attached_test.py" in out and "plain_test.py" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if "_test.py" in line}
    assert rows["plain_test.py"] == ["1", "ok", "1", "fail", "1", "ok", "1", "fail"]
    assert rows["attached_test.py"][:4] == ["1", "ok", "0", "fail"]  # without
    assert rows["attached_test.py"][4:] == ["0", "ok", "1", "fail"]  # with: attached
    assert "attached_test.py::test_no_foreign_middleware\n      UNEXPECTED" in out


def test_the_plugin_attaches_a_manager_to_every_agent_and_restores_agentscope(
    tmp_path: Path,
) -> None:
    original = Agent.__init__
    plugin.pytest_configure(None)  # type: ignore[arg-type]  # (it reads nothing of it)
    try:
        agent = Agent(name="a", system_prompt="s", model=FakeChatModel())
        ours = [m for m in agent._reasoning_middlewares if isinstance(m, ContextMiddleware)]
        assert len(ours) == 1
        working_dir = Path(ours[0].manager.config.working_dir)
        assert working_dir.is_dir() and working_dir.parent.name.startswith("agentscope-suite-")
        other = Agent(name="b", system_prompt="s", model=FakeChatModel())
        assert other._reasoning_middlewares[0].manager.working_dir != ours[0].manager.working_dir
        # an agent that already has our middleware is left as it is
        mw = ContextMiddleware(ContextConfig(working_dir=str(tmp_path)))
        mine = Agent(name="c", system_prompt="s", model=FakeChatModel(), middlewares=[mw])
        assert mine._reasoning_middlewares == [mw]
    finally:
        plugin.pytest_unconfigure(None)  # type: ignore[arg-type]
    assert Agent.__init__ is original
    assert not working_dir.exists()
    plain = Agent(
        name="d",
        system_prompt="s",
        model=OpenAIChatModel(credential=OpenAICredential(api_key="k"), model="m"),
    )
    assert plain._reasoning_middlewares == []
