"""The demos on AgentScope 2.x: a 2.x `Agent` with the demo's tools and the context
middleware (the line adapter of `agentscope_ctx.demo._runner`).

`ScriptedChatModel` plays the demo's `Script` as a 2.x chat model and reports usage the way
a provider does (`ChatUsage.input_tokens` = our count of the formatted prompt), so that
calibration sees a provider's numbers; `ScriptedCompactorChatModel` writes the Compactor's
summaries (`agentscope_ctx.testing.write_summary`). The offline bases (`CallChatModel`,
`OfflineChatModel`) are `agentscope_ctx.testing`'s. With a real model (`--model-config`),
`RecordingChatModel` wraps it. The context manager's notices (compactions, reliefs) come as
`CustomEvent(name="agentscope_ctx", value={"text": ...})` from the agent's `reply_stream`.

The context part is a 2.x `ContextManager` (its middleware given to the `Agent`), with the
compactor model of `--model-config` when there is one, else the scripted compactor model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

from agentscope.agent import Agent, ReActConfig
from agentscope.event import CustomEvent
from agentscope.formatter import FormatterBase
from agentscope.message import Msg, TextBlock, ToolCallBlock, UserMsg
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from agentscope.tool import ToolBase, Toolkit

from ..agentscope2._calls import prompt_usage
from ..agentscope2._manager import ContextManager
from ..agentscope2._middleware import NOTICE_EVENT
from ..agentscope2._tools import function_tool
from ..testing._model import CallChatModel, ChatCall, OfflineChatModel
from ._notices import Notices
from ._recording import Recorder
from ._runner import DemoRun, agent_name
from ._scripted import Move, Prompt, PromptStats, Schemas, Script
from ._summary import answer_compactor

__all__ = [
    "NOTICE_EVENT",
    "CallChatModel",
    "ChatCall",
    "OfflineChatModel",
    "RecordingChatModel",
    "ScriptedChatModel",
    "ScriptedCompactorChatModel",
    "start_session",
]


class ScriptedChatModel(OfflineChatModel):
    """Plays a `Script` as a 2.x chat model: the script counts each formatted prompt and
    chooses a move; the answer is a text or one tool call, with the usage a provider would
    report."""

    def __init__(self, script: Script) -> None:
        super().__init__("scripted-offline")
        self.script = script

    async def answer(self, formatted: Prompt, tools: Schemas) -> ChatResponse:
        step, tokens, move = await self.script.play(formatted, tools)
        content: list[TextBlock | ToolCallBlock] = [TextBlock(text=move.text)] if move.text else []
        answer = move.text
        if move.tool is not None:
            arguments = json.dumps(move.arguments)
            answer += arguments
            content.append(ToolCallBlock(id=f"call_{step:03d}", name=move.tool, input=arguments))
        usage = ChatUsage(
            input_tokens=tokens,
            output_tokens=await self.script.stats.counter.count_text(answer),
            time=0.0,
        )
        return ChatResponse(content=content, is_last=True, usage=usage)  # type: ignore[arg-type]


class ScriptedCompactorChatModel(OfflineChatModel):
    """The compactor's model offline: answers the Compactor's prompt with the summary
    `agentscope_ctx.testing.write_summary` writes from it, counted in `stats.compactor_calls`."""

    def __init__(self, stats: PromptStats, on_step: Callable[[str], None] | None) -> None:
        super().__init__("scripted-compactor")
        self.stats = stats
        self.on_step = on_step

    async def answer(self, formatted: Prompt, tools: Schemas) -> ChatResponse:
        text = await answer_compactor(self.stats, formatted, self.on_step)
        usage = ChatUsage(
            input_tokens=await self.stats.counter.count(formatted),
            output_tokens=await self.stats.counter.count_text(text),
            time=0.0,
        )
        return ChatResponse(content=[TextBlock(text=text)], is_last=True, usage=usage)


def provider_prompt(model: ChatModelBase, usage: ChatUsage | None) -> tuple[int, int] | None:
    """The prompt tokens a 2.x provider reported and the part read from its cache, or `None`
    (as the calibration reads them: `_calls.prompt_usage`)."""
    reported = prompt_usage(usage, model)
    return None if reported is None else (reported.tokens, reported.cached or 0)


class RecordingChatModel(Recorder, CallChatModel):
    """Wraps a real 2.x chat model (its formatter, credential and context window): counts
    each prompt, notes continuation reads, the provider's reported prompt tokens and the
    prompts it rejects (the 2.x twin of `demo._recording.RecordingModel`)."""

    @staticmethod
    def _base_arguments(inner: ChatModelBase) -> dict[str, Any]:
        return {
            "credential": inner.credential,
            "model": inner.model,
            "parameters": inner.parameters,
            "stream": inner.stream,
            "max_retries": 0,  # the inner model retries as it is configured to
            "context_size": inner.context_size,
        }

    @property
    def formatter(self) -> FormatterBase:
        """The wrapped model's (every provider's has one; the agent finds it here)."""
        formatter: FormatterBase = self.inner.formatter  # type: ignore[attr-defined]
        return formatter

    async def respond(self, call: ChatCall) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.inner.stream = self.stream
        formatted = await self.formatter.format(call.messages)
        return await self._record(
            formatted,
            call.tools,
            lambda: self.inner(
                call.messages, tools=call.tools, tool_choice=call.tool_choice, **call.kwargs
            ),
        )

    def _note(self, response: ChatResponse, step: int, tokens: int) -> None:
        reported = provider_prompt(self.inner, response.usage)
        if reported is not None:
            self.stats.provider_tokens[step - 1], self.stats.provider_cached[step - 1] = reported
        moves: list[Move] = []
        texts: list[str] = []
        for block in response.content:
            if isinstance(block, ToolCallBlock):
                try:
                    parsed = json.loads(block.input or "{}")
                except ValueError:
                    parsed = {}
                arguments: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
                move = Move(tool=block.name, arguments=arguments)
                move.continuation = self.stats.note_call(block.name, arguments)
                moves.append(move)
            elif isinstance(block, TextBlock):
                texts.append(block.text)
        self._describe(moves, texts, step, tokens, None if reported is None else reported[0])


class _Session:
    """The demo's 2.x `Agent` (see `agentscope_ctx.demo._runner.DemoSession`)."""

    def __init__(
        self, agent: Agent, manager: ContextManager, script: Script | None, notices: Notices
    ) -> None:
        self.agent = agent
        self.manager = manager
        self.script = script
        self.notices = notices

    async def ask(self, prompt: str) -> str:
        if self.script is not None:
            self.script.next_turn()
        final: Msg | None = None
        async for item in self.agent.reply_stream(UserMsg("user", prompt), yield_final_msg=True):
            if isinstance(item, CustomEvent) and item.name == NOTICE_EVENT:
                self.notices.note(str(item.value.get("text", "")))
            elif isinstance(item, Msg):
                final = item
        return (final.get_text_content() or "") if final is not None else ""

    async def close(self) -> None:
        await self.manager.close()


async def start_session(run: DemoRun) -> _Session:
    """The demo's agent on 2.x: scripted, or on the real `run.models`."""
    script: Script | None = None
    model: ScriptedChatModel | RecordingChatModel
    if run.models is None:
        script = Script(run.setup.turns, stats=run.stats, on_step=run.out)
        model = ScriptedChatModel(script)
    else:
        model = RecordingChatModel(run.models.model, stats=run.stats, on_step=run.out)
    tools: list[ToolBase] = [function_tool(tool, read_only=True) for tool in run.setup.tools]
    compactor: ChatModelBase = (
        ScriptedCompactorChatModel(run.stats, run.out)
        if run.models is None
        else run.models.compactor_model
    )
    manager = ContextManager(run.cfg, model=compactor, token_counter=run.stats.counter)
    agent = Agent(
        name=agent_name(run.name),
        system_prompt=run.setup.sys_prompt,
        model=model,
        toolkit=Toolkit(tools=tools),
        middlewares=[manager.middleware()],
        react_config=ReActConfig(max_iters=60),
    )
    return _Session(agent, manager, script, run.notices)
