"""The scripted models of the cost benchmark on AgentScope 2.x (`cost.line2`).

Each is a real 2.x `ChatModelBase` whose API call is scripted (what it answers is in
`cost.script`); each prompt is formatted with `OpenAIChatFormatter` (the formatter a 2.x
model owns) and metered by a `PromptMeter`.

`Provider` is the agent's model, and a provider's window: a prompt over `window` tokens (our
tiktoken count of what it received) is rejected with OpenAI's context-length error (HTTP
400), as a provider would, and the step is not consumed. It answers the agent's steps turn by
turn (the runner sets `turn`; a turn that failed leaves its remaining steps unanswered), and
AgentScope's own context compression (a structured-output call, forced `tool_choice` on the
`generate_structured_output` tool) with a `generate_structured_output` tool call that fills
every field of the requested schema. It reports the prompt's size as usage.

`Helper` is the context manager's own model: the compactor's calls (no tools) and the
Summarizer's (memory-file tools), metered by kind.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agentscope.message import TextBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage

from agentscope_ctx.demo._line2 import OfflineChatModel
from agentscope_ctx.demo._scripted import Prompt, Schemas
from benchmarks.cost import script as cost_script
from benchmarks.cost.meter import PromptMeter
from benchmarks.cost.session import Step

STRUCTURED = "generate_structured_output"

ScriptedBase = OfflineChatModel
"""The name `pipeline.steady2` imports the demo's offline 2.x model by."""


def _names(tools: list[dict[str, Any]] | None) -> list[str]:
    return [str(t.get("function", {}).get("name")) for t in tools or []]


def _reply(text: str, call: tuple[str, str, dict[str, Any]] | None, tokens: int) -> ChatResponse:
    content: list[Any] = [TextBlock(text=text)] if text or call is None else []
    if call is not None:
        call_id, name, args = call
        content.append(ToolCallBlock(id=call_id, name=name, input=json.dumps(args)))
    usage = ChatUsage(input_tokens=max(tokens, 1), output_tokens=20, time=0.0)
    return ChatResponse(content=content, is_last=True, usage=usage)


class Provider(OfflineChatModel):
    """The agent's model and its provider's window (see the module docstring)."""

    def __init__(
        self,
        plan: list[list[Step]],
        meter: PromptMeter,
        compression: PromptMeter,
        *,
        window: int,
    ) -> None:
        super().__init__("scripted-agent", context_size=window)
        self.window = window
        self.meter = meter
        self.compression = compression
        self.turns = cost_script.agent_answers(plan)
        self.turn = 0
        self._step = 0
        self._turn_seen = -1
        self.rejected: list[int] = []
        """The prompt sizes of the rejected agent calls."""
        self.rejected_compression: list[int] = []
        self.issued: set[str] = set()
        """The call ids of the tool calls answered."""
        self.answers = 0
        """The turns answered to the end."""
        self.probe: Callable[[], None] | None = None
        """Called before each agent call (the benchmark counts compactions with it)."""

    async def answer(self, formatted: Prompt, tools: Schemas) -> ChatResponse:
        structured = STRUCTURED in _names(tools)
        if not structured and self.probe is not None:
            self.probe()
        call = await (self.compression if structured else self.meter).measure(formatted, tools)
        tokens = call.budget_tokens
        if tokens > self.window:
            (self.rejected_compression if structured else self.rejected).append(tokens)
            raise RuntimeError(
                f"Error code: 400 - This model's maximum context length is {self.window} "
                f"tokens. However, your messages resulted in {tokens} tokens."
            )
        if structured:
            schema = (tools or [{}])[0].get("function", {}).get("parameters", {})
            goal, paths = cost_script.goal_and_paths(cost_script.dumps(formatted))
            fields = cost_script.structured_summary(schema.get("properties", {}), goal, paths)
            return _reply("", (f"summary-{len(self.compression.calls)}", STRUCTURED, fields), 0)
        if self._turn_seen != self.turn:
            self._turn_seen, self._step = self.turn, 0
        answers = self.turns[self.turn] if self.turn < len(self.turns) else []
        if self._step >= len(answers):
            return _reply("Nothing more to do.", None, tokens)
        answer = answers[self._step]
        self._step += 1
        step = answer.step
        if step is None:
            self.answers += 1
            return _reply(answer.text, None, tokens)
        self.issued.add(step.call_id)
        return _reply(answer.text, (step.call_id, cost_script.TOOL, answer.arguments), tokens)


class Helper(OfflineChatModel):
    """The manager's own model: compactor and Summarizer calls, each metered on its own."""

    def __init__(self, make_meter: Callable[[], PromptMeter]) -> None:
        super().__init__("scripted-helper", context_size=1_000_000)
        self.meters = {kind: make_meter() for kind in ("compactor", "summarizer")}
        self.last_summary = ""
        """The last summary it wrote as the compactor."""
        self._ids = 0

    async def answer(self, formatted: Prompt, tools: Schemas) -> ChatResponse:
        kind = cost_script.helper_kind(_names(tools), False)
        call = await self.meters[kind].measure(formatted, tools)
        text = cost_script.dumps(formatted)
        if kind == "compactor":
            self.last_summary = cost_script.summary(*cost_script.goal_and_paths(text))
            return _reply(self.last_summary, None, call.budget_tokens)
        done = sum(1 for m in formatted if m.get("role") == "tool")
        step = cost_script.summarizer_step(done, text)
        if step is None:
            return _reply("Recorded one lesson.", None, call.budget_tokens)
        self._ids += 1
        return _reply("", (f"helper-{self._ids}", *step), call.budget_tokens)
