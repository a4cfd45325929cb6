"""The scripted models of the cost benchmark on AgentScope 1.x (`cost.line1`).

`AgentScript` is the agent's model: it answers from the script by call number and hands each
prompt to a `PromptMeter`. `HelperModel` is the context manager's own model (or the built-in
compression's): it answers compactor, Summarizer and structured-summary calls from the prompt
alone, and meters each kind separately. What they answer is in `cost.script`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentscope.message import TextBlock, ToolUseBlock
from agentscope.model import ChatResponse

from agentscope_ctx.demo._line1 import OfflineModel
from agentscope_ctx.demo._scripted import Prompt, Schemas
from benchmarks.cost import script as cost_script
from benchmarks.cost.meter import PromptMeter
from benchmarks.cost.session import Step


def _response(text: str, call: tuple[str, str, dict[str, Any]] | None = None) -> ChatResponse:
    content: list[Any] = [TextBlock(type="text", text=text)] if text or call is None else []
    if call is not None:
        call_id, name, args = call
        content.append(
            ToolUseBlock(
                type="tool_use", id=call_id, name=name, input=args, raw_input=json.dumps(args)
            )
        )
    return ChatResponse(content=content)


class AgentScript(OfflineModel):
    """The agent's model: one tool call per step of the script, then the turn's answer."""

    def __init__(self, plan: list[list[Step]], meter: PromptMeter) -> None:
        super().__init__("scripted-agent")
        self.meter = meter
        self.probe: Callable[[], None] | None = None
        """Called before each answer (the benchmark counts compactions with it)."""
        self._answers = [
            _response(
                a.text, None if a.step is None else (a.step.call_id, cost_script.TOOL, a.arguments)
            )
            for answers in cost_script.agent_answers(plan)
            for a in answers
        ]
        self._next = 0

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        if self.probe is not None:
            self.probe()
        await self.meter.measure(messages, tools)
        if self._next >= len(self._answers):
            return ChatResponse(content=[TextBlock(type="text", text="Nothing more to do.")])
        self._next += 1
        return self._answers[self._next - 1]


class HelperModel(OfflineModel):
    """The manager's own model: compactor calls (no tools), Summarizer calls (memory-file
    tools) and the built-in compression's structured calls, each metered on its own."""

    def __init__(self, make_meter: Callable[[], PromptMeter]) -> None:
        super().__init__("scripted-helper")
        self.meters = {kind: make_meter() for kind in ("compactor", "summarizer", "compression")}
        self.last_summary = ""
        """The last summary it wrote as the compactor."""
        self._ids = 0

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        names = [str(t.get("function", {}).get("name")) for t in tools or []]
        kind = cost_script.helper_kind(names, structured is not None)
        await self.meters[kind].measure(messages, tools)
        text = cost_script.dumps(messages)
        goal, paths = cost_script.goal_and_paths(text)
        if kind == "compression":
            fields = cost_script.structured_summary(structured.model_fields, goal, paths)
            return ChatResponse(content=[TextBlock(type="text", text="")], metadata=fields)
        if kind == "compactor":
            self.last_summary = cost_script.summary(goal, paths)
            return _response(self.last_summary)
        done = sum(1 for m in messages if m.get("role") == "tool")
        step = cost_script.summarizer_step(done, text)
        if step is None:
            return _response("Recorded one lesson.")
        self._ids += 1
        return _response("", (f"helper-{self._ids}", *step))
