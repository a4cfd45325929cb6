"""The demos on AgentScope 1.x: a `ReActAgent` with the `ContextManager` attached.

`ScriptedModel` plays the demo's `Script` as a 1.x chat model, and `ScriptedCompactorModel`
writes the Compactor's summaries (`agentscope_ctx.testing.write_summary`); with a real model,
`RecordingModel` wraps it; the offline base (`CallModel`) is `agentscope_ctx.testing`'s. The
manager's notices (compactions, reliefs) are the lines it logs, which a log handler passes on
to the demo's `Notices`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse
from agentscope.tool import Toolkit

from ..agentscope1._manager import ContextManager
from ..core.tokens._calibration import prompt_usage
from ..testing._model import Call, CallModel
from ._notices import Notices
from ._recording import Recorder
from ._runner import DemoRun, agent_name
from ._scripted import Move, Prompt, PromptStats, Schemas, Script
from ._summary import answer_compactor

__all__ = [
    "OfflineModel",
    "RecordingModel",
    "ScriptedCompactorModel",
    "ScriptedModel",
    "start_session",
]


class OfflineModel(CallModel):
    """A 1.x chat model answered here (no provider, no streaming): `answer` gets what a
    provider would (the formatted messages, the tool schemas, the structured model)."""

    def __init__(self, model_name: str) -> None:
        super().__init__(model_name=model_name, stream=False)

    async def respond(self, call: Call) -> ChatResponse:
        return await self.answer(call.messages, call.tools, call.structured_model)

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        """The response to one call."""
        raise NotImplementedError


class ScriptedModel(OfflineModel):
    """Plays a `Script` as a 1.x chat model (OpenAI-style prompts, see `Script.play`)."""

    def __init__(self, script: Script) -> None:
        super().__init__("scripted-offline")
        self.script = script

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        step, _, move = await self.script.play(messages, tools)
        if move.tool is None:
            return ChatResponse(content=[TextBlock(type="text", text=move.text)])
        said = [TextBlock(type="text", text=move.text)] if move.text else []
        call = ToolUseBlock(
            type="tool_use",
            id=f"call_{step:03d}",
            name=move.tool,
            input=move.arguments,
            raw_input=json.dumps(move.arguments),
        )
        return ChatResponse(content=[*said, call])


class ScriptedCompactorModel(OfflineModel):
    """The compactor's model offline: answers the Compactor's prompt with the summary
    `_summary.write_summary` writes from it (counted in `stats.compactor_calls`)."""

    def __init__(self, stats: PromptStats, on_step: Callable[[str], None] | None) -> None:
        super().__init__("scripted-compactor")
        self.stats = stats
        self.on_step = on_step

    async def answer(self, messages: Prompt, tools: Schemas, structured: Any) -> ChatResponse:
        text = await answer_compactor(self.stats, messages, self.on_step)
        return ChatResponse(content=[TextBlock(type="text", text=text)])


class RecordingModel(Recorder, CallModel):
    """Wraps a real chat model: counts each prompt, notes continuation reads, the provider's
    reported prompt tokens and the prompts it rejects.

    Args:
        inner: the real model.
        stats: counts each prompt received and watches its notices.
        on_step: called with a one-line description of each answer (or rejection).
    """

    @staticmethod
    def _base_arguments(inner: ChatModelBase) -> dict[str, Any]:
        return {"model_name": inner.model_name, "stream": inner.stream}

    async def respond(self, call: Call) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.inner.stream = self.stream
        return await self._record(
            call.messages,
            call.tools,
            lambda: self.inner(
                call.messages,
                tools=call.tools,
                tool_choice=call.tool_choice,
                structured_model=call.structured_model,
                **call.kwargs,
            ),
        )

    def _note(self, response: ChatResponse, step: int, tokens: int) -> None:
        usage = prompt_usage(getattr(response, "usage", None))
        provider = None if usage is None else usage.tokens
        if usage is not None:
            self.stats.provider_tokens[step - 1] = usage.tokens
            self.stats.provider_cached[step - 1] = usage.cached
        moves: list[Move] = []
        texts: list[str] = []
        for block in response.content:
            if block.get("type") == "tool_use":
                raw = block.get("input")
                arguments: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
                name = str(block.get("name"))
                move = Move(tool=name, arguments=arguments)
                move.continuation = self.stats.note_call(name, arguments)
                moves.append(move)
            elif block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        self._describe(moves, texts, step, tokens, provider)


class _LogNotices(logging.Handler):
    """Passes the manager's log lines on to the demo's notices."""

    def __init__(self, notices: Notices) -> None:
        super().__init__(logging.INFO)
        self.notices = notices

    def emit(self, record: logging.LogRecord) -> None:
        self.notices.note(record.getMessage())


class _Session:
    """The demo's `ReActAgent` and manager (see `DemoSession`)."""

    def __init__(
        self,
        agent: ReActAgent,
        manager: ContextManager,
        script: Script | None,
        notices: Notices,
    ) -> None:
        self.agent = agent
        self.manager = manager
        self.script = script
        self._handler = _LogNotices(notices)
        self._logger = logging.getLogger("agentscope_ctx")
        self._level = self._logger.level
        self._logger.addHandler(self._handler)
        if self._logger.getEffectiveLevel() > logging.INFO:
            self._logger.setLevel(logging.INFO)

    async def ask(self, prompt: str) -> str:
        if self.script is not None:
            self.script.next_turn()
        reply = await self.agent(Msg("user", prompt, "user"))
        return reply.get_text_content() or ""

    async def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._logger.setLevel(self._level)
        await self.manager.close()


async def start_session(run: DemoRun) -> _Session:
    """The demo's agent on 1.x: scripted, or on the real `run.models`."""
    model: ScriptedModel | RecordingModel
    script: Script | None = None
    if run.models is None:
        script = Script(run.setup.turns, stats=run.stats, on_step=run.out)
        model = ScriptedModel(script)
        formatter: FormatterBase = OpenAIChatFormatter()
        manager = ContextManager(
            run.cfg,
            model=ScriptedCompactorModel(run.stats, run.out),
            formatter=OpenAIChatFormatter(),
            token_counter=run.stats.counter,
        )
    else:
        model = RecordingModel(run.models.model, stats=run.stats, on_step=run.out)
        formatter = run.models.formatter
        manager = ContextManager(
            run.cfg,
            model=run.models.compactor_model,
            formatter=run.models.compactor_formatter,
            token_counter=run.stats.counter,
        )
    toolkit = Toolkit()
    for tool in run.setup.tools:
        toolkit.register_tool_function(tool)
    agent = ReActAgent(
        name=agent_name(run.name),
        sys_prompt=run.setup.sys_prompt,
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=60,
    )
    agent.set_console_output_enabled(False)
    manager.attach(agent)
    return _Session(agent, manager, script, run.notices)
