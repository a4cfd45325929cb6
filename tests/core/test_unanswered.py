"""`unanswered`: which messages leave a shared context because a call in them got no result."""

from __future__ import annotations

from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core.context._unanswered import unanswered


def _call(*ids: str) -> Msg:
    blocks: list[Any] = [{"type": "tool_use", "id": i, "name": "scan", "input": {}} for i in ids]
    return Msg("worker", blocks, "assistant")


def _result(call_id: str) -> Msg:
    block = {"type": "tool_result", "id": call_id, "name": "scan", "output": "ok"}
    return Msg("system", [block], "system")


def test_answered_calls_stay_and_an_open_one_leaves_with_its_siblings_results() -> None:
    question = Msg("user", "scan", "user")
    done, done_result = _call("a"), _result("a")
    pair = _call("b", "c")  # parallel calls: b answered, c not (the worker was killed)
    b_result = _result("b")
    later = Msg("user", "and now?", "user")
    msgs = [question, done, done_result, pair, b_result, later]
    assert unanswered(msgs) == [pair.id, b_result.id]
    assert unanswered([question, done, done_result, later]) == []
    assert unanswered([]) == []
