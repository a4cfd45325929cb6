"""The hooks of `ContextMiddleware`: agentscope_ctx as a native AgentScope 2.x middleware.

It brings to a 2.x `Agent` what the hooks bring to a 1.x `ReActAgent` (DESIGN.md §3-§10):

- `on_reply`: install the tools (`read_file`; `remember`/`log_today`; `search_history` with
  recall), offer MEMORY.md at the first reply, and after the reply note the prompt's size for
  `agentscope-ctx inspect`;
- `on_acting`: cut each tool's final response over its limit, losslessly (saved first, the
  notice, `read_file` to read on); the recall names the tool on what was saved;
- `on_reasoning`: before every model call, the pipeline on the agent's state (`StateMirror`):
  first cuts, the pressure ladder, compaction to `state.summary` (the raw messages saved to
  `dialog/` first), the last-resort fit; what happened comes out as
  `CustomEvent(name="agentscope_ctx", value={"text": ..., "tokens_before": ..., ...})`
  (the run's figures beside the text: `notice_figures`);
- `on_model_call`: what the model is shown (views of outputs that could not be saved), the
  provider's usage into the calibration, and one emergency compaction and retry after a
  context-length error (`_calls`);
- `on_compress_context`: AgentScope's own compression never runs (it counts bytes / 4 and
  drops messages when its summary fails); a manual `agent.compress_context(instructions=...)`
  or the `CompressContext` tool compacts through the pipeline instead.

Create it through `ContextManager(config, model=...)`: `manager.attach(agent)` adds it to an
existing agent, `manager.middleware()` gives it for `Agent(..., middlewares=[...])` (put it
last: innermost, it sees the final prompt and the raw tool). `ContextMiddleware(config)`
alone makes a manager of its own.

Decisions where the design is silent:

- agentscope_ctx takes over the truncation of tool output, as on 1.x it takes over the
  compression: the agent's `tool_result_limit` (tokens) is raised to our largest byte limit
  (a copy of its `context_config`; logged at WARNING when the old value was not AgentScope's
  default), so the agent never cuts our notice off.
- Nothing is cut for an agent whose toolkit could not get `read_file` (a notice must not
  point to a tool the model does not have); an output that cannot be saved stays whole. Both
  are logged once, and the reply goes on.
- A tool named `read_file` that is not ours makes the first reply fail with a
  `ContextUsageError` (on 1.x, `attach` refuses it): fix the setup.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentscope.agent import ContextConfig as AgentContextConfig
from agentscope.event import AgentEvent, CustomEvent
from agentscope.message import HintBlock, Msg, TextBlock, ToolCallBlock
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatResponse
from agentscope.tool import ToolBase, ToolChunk, ToolResponse

from ..core._errors import ContextUsageError
from ..core.search._search_text import key_args
from ..core.truncation._offload import cut_texts
from ..core.truncation._truncation import parse_notice
from ..recall._read_scope import CALLER
from ..services._traced import notice_figures
from ._calls import guarded_call
from ._native import take_pending
from ._read_file import READ_FILE, ReadFileTool
from ._workspace import offload_output

if TYPE_CHECKING:
    from agentscope.agent import Agent

    from ._agents import AgentRuns
    from ._binding import Binding

__all__ = ["NOTICE_EVENT", "MiddlewareHooks"]

logger = logging.getLogger("agentscope_ctx")

NOTICE_EVENT = "agentscope_ctx"
"""The `CustomEvent` name of this package's notices (compactions, reliefs, failures)."""

_AGENT_DEFAULT_LIMIT = AgentContextConfig.model_fields["tool_result_limit"].default
"""AgentScope's default `tool_result_limit`: raising it is routine, not worth a warning."""

ReplyItem = AgentEvent | Msg
ActingItem = ToolChunk | ToolResponse
ModelResult = ChatResponse | AsyncGenerator[ChatResponse, None]


class MiddlewareHooks(MiddlewareBase):
    """The hooks of `ContextMiddleware` (`_manager`, which also makes a manager for a
    middleware built on its own), working for `manager`."""

    def __init__(self, manager: AgentRuns) -> None:
        self.manager = manager
        self.config = manager.config
        self.store = manager.store
        self.read_file = ReadFileTool(manager.reader)
        self.told: set[tuple[str, int, int]] = set()
        """The raises of `tool_result_limit` logged already: each is logged once (an app
        server assembles a new agent every turn), the set may be shared by middlewares."""

    async def list_tools(self) -> list[ToolBase]:
        """The tools this middleware adds to an agent's toolkit (the 2.x idiom
        `Toolkit(tools=await mw.list_tools())`); `on_reply` adds them anyway."""
        return [self.read_file, *self.manager.extra_tools()]

    # -- hooks -------------------------------------------------------------------------

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[ReplyItem, None]],
    ) -> AsyncGenerator[ReplyItem, None]:
        """Install the tools and MEMORY.md, reply, then note the prompt's size."""
        binding = self.manager.bind(agent)
        await self._install(agent, binding)
        binding.replying = True
        try:
            async for item in next_handler(**input_kwargs):
                yield item
        finally:
            binding.replying = False
            # the last model call's usage came after the last push: into the saved state too
            self.manager.save_slot(binding)
        try:  # the answer came after the last pull: the context the record shows has it
            async with binding.lock:
                await binding.mirror.pull(agent.state)
        except Exception:
            logger.exception("agentscope_ctx: could not read the agent's state after its reply")
        await self.manager.note_usage(str(agent.name), binding.pipeline)

    async def on_reasoning(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        """Run the pipeline on the agent's state, then reason as usual."""
        binding = self.manager.bind(agent)
        await take_pending(self.manager, agent, binding)  # a provider's compaction (native)
        await self.manager.refresh_parts(agent, binding)
        report = await self.manager.run(binding)
        binding.pipeline.compaction.prompts.expect()  # the model call sends the state next
        figures = notice_figures(report)
        for text in binding.take_notices():
            yield CustomEvent(name=NOTICE_EVENT, value={"text": text, **figures})
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_acting(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[ActingItem, None]],
    ) -> AsyncGenerator[ActingItem, None]:
        """Run the tool; cut its final response (what the agent stores) to the limit."""
        tool_call = input_kwargs["tool_call"]
        binding = self.manager.bind(agent)
        call = tool_call if isinstance(tool_call, ToolCallBlock) else None
        limit = None if call is None else self._limit(agent, binding, call)
        token = CALLER.set(self.manager.tenant_of(str(agent.name)))  # whose read_file this is
        try:
            async for item in next_handler(**input_kwargs):
                if limit is not None and call is not None and isinstance(item, ToolResponse):
                    whole = item
                    item = await self._cut(item, limit, binding, call)
                    if item is not whole:  # saved and cut: the agent's workspace gets a copy
                        await offload_output(agent, call, list(whole.content))
                yield item
        finally:
            try:
                CALLER.reset(token)
            except ValueError:  # the generator was closed from another context
                CALLER.set(None)

    async def on_model_call(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[ModelResult]],
    ) -> ModelResult:
        """Show the model its view, learn from its usage, recover from an overflow."""
        binding = self.manager.bind(agent)
        return await guarded_call(self.manager, agent, binding, input_kwargs, next_handler)

    async def on_compress_context(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., Awaitable[None]],
    ) -> None:
        """Replace AgentScope's compression: never call it (see the module docstring)."""
        binding = self.manager.bind(agent)
        instructions = input_kwargs.get("instructions")
        forced = instructions is not None or input_kwargs.get("context_config") is not None
        if not forced and binding.replying:
            return  # the automatic call before reasoning: `on_reasoning` runs the pipeline
        extra = _hint_text(instructions) if isinstance(instructions, HintBlock) else None
        await self.manager.refresh_parts(agent, binding)
        when = "forced" if forced else "compress_context"
        await self.manager.run(binding, when=when, force=forced, extra_instruction=extra)

    # -- tools -------------------------------------------------------------------------

    async def _install(self, agent: Agent, binding: Binding) -> None:
        """At the start of every reply: take over the agent's own cut of tool results, and
        add our tools to its toolkit where missing (cut nothing if `read_file` is missing).

        Raises:
            ContextUsageError: the toolkit has another tool named `read_file`.
        """
        self._own_truncation(agent)
        toolkit = agent.toolkit
        binding.cutting = False
        try:
            existing = await toolkit.get_tool(READ_FILE)
            if existing is None:
                await toolkit.add_tool(self.read_file)
            elif not self._usable(existing):
                raise ContextUsageError(
                    f"agent {agent.name!r} already has a tool named {READ_FILE!r} "
                    f"({type(existing).__name__}); agentscope_ctx adds its own (the "
                    "continuation tool of truncated output): remove yours first"
                )
            for tool in self.manager.extra_tools(binding):
                if await toolkit.get_tool(tool.name) is None:
                    await toolkit.add_tool(tool)
        except ContextUsageError:
            raise
        except Exception as exc:  # a broken toolkit must not end the reply: cut nothing
            self.manager.failures.failed(
                "read_file",
                f"cannot add {READ_FILE} to the toolkit of agent {agent.name!r}, so tool "
                f"output is not cut: {exc}",
            )
            return
        self.manager.failures.recovered("read_file")
        binding.cutting = True

    def _own_truncation(self, agent: Agent) -> None:
        """Raise the agent's `tool_result_limit` (tokens) to our largest byte limit."""
        policy = self.manager.policy
        needed = max(policy.standard.recent, policy.markdown.recent)
        current = agent.context_config.tool_result_limit
        if current >= needed:
            return
        agent.context_config = agent.context_config.model_copy(update={"tool_result_limit": needed})
        if (str(agent.name), current, needed) in self.told:
            return
        self.told.add((str(agent.name), current, needed))
        logger.log(
            logging.INFO if current == _AGENT_DEFAULT_LIMIT else logging.WARNING,
            "agentscope_ctx: raising the tool_result_limit of agent %r from %d to %d tokens: "
            "agentscope_ctx cuts tool output itself, losslessly (ToolResultConfig sets the "
            "limits); the agent's own cut would drop the rest of an output",
            agent.name,
            current,
            needed,
        )

    def _usable(self, tool: ToolBase) -> bool:
        """Whether `tool` is a `read_file` of this package that reads this store."""
        if tool is self.read_file:
            return True
        if not isinstance(tool, ReadFileTool):
            return False
        store_dir = self.manager.backend.store_dir
        if store_dir is None:  # a store that is not files: that reader reads it through it
            return tool.reader.sources == self.manager.backend.source
        return any(store_dir.is_relative_to(root) for root in tool.reader.roots)

    # -- first truncation --------------------------------------------------------------

    def _limit(self, agent: Agent, binding: Binding, call: ToolCallBlock) -> int | None:
        """The byte limit of this call's output, or `None` to leave it whole."""
        if call.name == READ_FILE or not binding.cutting:
            return None  # read_file cuts its own output and points at the file it read
        return self.manager.policy.limits(call.name, _arguments(call)).recent

    async def _cut(
        self, response: ToolResponse, limit: int, binding: Binding, call: ToolCallBlock
    ) -> ToolResponse:
        """`response` with each text block cut to its share of `limit` (saved first)."""
        try:
            texts = [i for i, block in enumerate(response.content) if isinstance(block, TextBlock)]
            if not texts:
                return response
            raw = [response.content[i].text for i in texts]  # type: ignore[union-attr]
            cut = await cut_texts(raw, limit, binding.store, self.manager.failures)
            content = list(response.content)
            saved: list[str] = []
            for i, old, text in zip(texts, raw, cut, strict=True):
                if text == old:
                    continue
                content[i] = content[i].model_copy(update={"text": text})
                parsed = parse_notice(text)
                if parsed is not None:
                    saved.append(parsed[1].file_path)
            if saved and binding.recall is not None:
                await binding.recall.describe_saved(saved, call.name, key_args(_arguments(call)))
            return response.model_copy(update={"content": content})
        except Exception:  # a bug here must not end the reply: the output stays whole
            logger.exception("agentscope_ctx: could not cut a tool output; it stays whole")
            return response


def _arguments(call: ToolCallBlock) -> dict[str, Any]:
    try:
        arguments = json.loads(call.input or "{}")
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def _hint_text(hint: HintBlock) -> str:
    if isinstance(hint.hint, str):
        return hint.hint
    return "\n".join(b.text for b in hint.hint if isinstance(b, TextBlock))
