"""The fleet example's scripted model server (examples/fleet/model_server.py) answers the
context manager's compaction request with a summary the compactor takes: on the installed
line, the real `Compactor` asks it (through a scripted model relaying each formatted prompt to
the server's `reply_to`, as the server gets it over HTTP) and keeps its answer, a model
compaction, not the extractive fallback. The whole example, with a compaction written by its
model: tests/fleet/test_fleet_example1.py and test_fleet_example2.py (slow)."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from types import ModuleType
from typing import Any

import pytest

from agentscope_ctx import Compactor, CompactorConfig, TokenCounter
from agentscope_ctx.core.summary._extractive import validate_summary
from agentscope_ctx.testing import ScriptedChatModel, write_summary
from tests.fleet.example_run import EXAMPLE
from tests.support.lines import IS_1X, Msg


def model_server() -> ModuleType:
    return example_module("model_server")


def example_module(name: str) -> ModuleType:
    """examples/fleet/NAME.py, imported from its file."""
    spec = importlib.util.spec_from_file_location(f"fleet_{name}", EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def formatter() -> Any:
    """The 1.x workers' formatter (a 2.x model formats its own prompts)."""
    if not IS_1X:
        return None
    from agentscope.formatter import OpenAIChatFormatter

    return OpenAIChatFormatter()


def turns(n: int) -> list[Msg]:
    """The example's chat: 'turn N: read FILE' / 'run: COMMAND', a tool call, its result."""
    msgs: list[Msg] = []
    for t in range(1, n + 1):
        call = {
            "type": "tool_use",
            "id": f"c{t}",
            "name": "cat_file",
            "input": {"path": f"f{t}.log"},
        }
        result = {
            "type": "tool_result", "id": f"c{t}", "name": "cat_file",
            "output": [{"type": "text", "text": f"line {t}\nERROR disk quota exceeded on node-{t}"}],
        }  # fmt: skip
        msgs += [
            Msg("user", f"turn {t}: read f{t}.log", "user"),
            Msg("assistant", [call], "assistant"),
            Msg("system", [result], "system"),
            Msg("assistant", f"turn {t} answered.", "assistant"),
        ]
    return msgs


async def test_its_compaction_summary_is_taken_as_the_models(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = model_server()
    sent: list[str] = []

    def over_http(prompt: list[dict[str, Any]]) -> str:
        reply = server.reply_to({"model": "fleet", "messages": prompt})
        sent.append(reply["content"])
        return str(reply["content"])

    model = ScriptedChatModel(default=over_http, summaries=False)
    compactor = Compactor(
        CompactorConfig(),
        model=model,
        formatter=formatter(),
        counter=TokenCounter("cl100k_base"),
        max_input_tokens=12_000,
    )
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        result = await compactor.compact("", turns(6))
    assert (result.source, result.reason) == ("model", None), result
    assert result.summary == sent[-1] and validate_summary(result.summary) is None
    assert "ERROR disk quota exceeded on node-1" in result.summary
    assert "turn 1: read f1.log" in result.summary
    assert "extractive" not in caplog.text


def worker_summary(turns: int) -> str:
    """A previous summary as the 1.x workers' compactions left it on their 4,000-token budget
    (client1.py's turns): a call and its saved output's ref (hex: about two characters a
    token) a turn."""
    turn_text = example_module("client2").turn_text  # the example's turns (client1.py's too)
    calls = []
    for t in range(1, turns + 1):
        ask = turn_text(t, slow=t == 5)
        if "run: " in ask:
            calls.append(f"`shell(command={ask.split('run: ', 1)[1]!r})`")
        else:
            calls.append(f"`cat_file(path={ask.split('read ', 1)[1]!r})`")
    refs = [hashlib.md5(str(t).encode()).hexdigest() for t in range(1, turns + 1)]
    done = "\n".join(f"- called {call}" for call in calls)
    context = "\n".join(
        f"- 31 lines, whole in pg-output:{ref} (from: called {call}); read on with read_file"
        for ref, call in zip(refs, calls, strict=True)
    )
    answered = "\n".join(f"- turn {t} answered." for t in range(turns - 4, turns + 1))
    return (
        f"## Goal\n- turn 1: read build-1.log\n## Constraints\n- (none)\n## Progress\n"
        f"### Done\n{done}\n### In progress\n- (none)\n### Blocked\n- (none)\n"
        f"## Key Decisions\n{answered}\n## Next Steps\n- wait for the user's next request; "
        f"older details are in dialog/\n## Critical Context\n{context}"
    )


async def test_a_summary_too_long_by_a_few_tokens_is_shortened_on_the_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The 1.x example's last compaction: one new user message onto a summary of eight turns,
    whose refs take about two characters a token. The summary may not outgrow what it
    replaces; the server's first answer did by 3 tokens, and its retry, sized at 3 characters
    a token, was the same answer: the extractive fallback, with a warning. The retry is sized
    by the rejected answer's own characters a token."""
    server = model_server()
    model = ScriptedChatModel(
        default=lambda prompt: str(server.reply_to({"model": "f", "messages": prompt})["content"]),
        summaries=False,
    )
    compactor = Compactor(
        CompactorConfig(),
        model=model,
        formatter=formatter(),
        counter=TokenCounter("cl100k_base"),
        max_input_tokens=4_000,
    )
    new = [Msg("alice", "turn 9: read build-9.log", "user")]
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        result = await compactor.compact(worker_summary(8), new)
    assert result.source == "model_retry", result
    assert "turn 9: read build-9.log" in result.summary
    assert validate_summary(result.summary) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_turn_is_still_a_tool_call_and_a_title_a_text() -> None:
    server = model_server()
    turn = server.reply_to({"messages": [{"role": "user", "content": "turn 3: read a.log"}]})
    assert turn["tool_calls"][0]["function"]["name"] == "cat_file"
    titled = server.reply_to({"messages": [{"role": "user", "content": "hello"}]})
    assert titled == {"role": "assistant", "content": "A fleet chat"}
    assert write_summary("hello") not in {turn.get("content"), titled["content"]}
