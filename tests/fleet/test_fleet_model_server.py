"""The fleet example's scripted model server (examples/fleet/model_server.py) answers the
context manager's compaction request with a summary the compactor takes: on the installed
line, the real `Compactor` asks it (through a scripted model relaying each formatted prompt to
the server's `reply_to`, as the server gets it over HTTP) and keeps its answer, a model
compaction, not the extractive fallback. The whole example, with a compaction written by its
model: tests/fleet/test_fleet_example1.py and test_fleet_example2.py (slow)."""

from __future__ import annotations

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
    spec = importlib.util.spec_from_file_location("fleet_model_server", EXAMPLE / "model_server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    formatter = None
    if IS_1X:
        from agentscope.formatter import OpenAIChatFormatter

        formatter = OpenAIChatFormatter()
    compactor = Compactor(
        CompactorConfig(),
        model=model,
        formatter=formatter,
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


def test_a_turn_is_still_a_tool_call_and_a_title_a_text() -> None:
    server = model_server()
    turn = server.reply_to({"messages": [{"role": "user", "content": "turn 3: read a.log"}]})
    assert turn["tool_calls"][0]["function"]["name"] == "cat_file"
    titled = server.reply_to({"messages": [{"role": "user", "content": "hello"}]})
    assert titled == {"role": "assistant", "content": "A fleet chat"}
    assert write_summary("hello") not in {turn.get("content"), titled["content"]}
