"""`ContextMiddleware`: agentscope_ctx as a native AgentScope 2.x middleware (prototype).

Phase 1 of issue 14 brings one job of the 1.x adapter to a 2.x `Agent`: the lossless first
truncation of tool output (DESIGN.md §4), and `read_file` to read on::

    middleware = ContextMiddleware(ContextConfig(working_dir="..."))
    agent = Agent(name=..., system_prompt=..., model=..., toolkit=Toolkit(),
                  middlewares=[middleware])

It wraps the raw tool execution (`on_acting`). The tool's chunks pass through whole: the
agent turns them into events for the user and stores none of them. The final `ToolResponse`
is what the agent stores (as the `ToolResultBlock` of the call, inside the reply's assistant
message): each of its text blocks over the byte limit is saved whole to `tool_result/`, then
replaced by an excerpt and the notice, exactly as on 1.x (same store, policy and notice).
`read_file` is added to the agent's toolkit at the start of every reply (`on_reply`) when it
is not there; `list_tools` offers it too, the 2.x way to build a toolkit for a middleware.

Decisions where the design is silent:

- agentscope_ctx takes over the truncation of tool output, as on 1.x it takes over the
  compression: the limits are the policy's (`ToolResultConfig`, per tool and path). The agent
  cuts a stored result over its `ContextConfig.tool_result_limit` tokens to a head and drops
  the rest, our notice included; so an agent whose limit is below our largest byte limit gets
  it raised to that (a copy of its `context_config`; logged at WARNING when the old value was
  not AgentScope's default). No tokenizer makes more tokens than bytes: our outputs, and
  `read_file`'s, are then never cut again.
- Nothing is cut for an agent whose toolkit could not get `read_file` (a notice must not
  point to a tool the model does not have); an output that cannot be saved stays whole. Both
  are logged once (`FailureLog`), and the reply goes on.
- A tool named `read_file` that is not ours makes the first reply fail with a
  `ContextUsageError` (on 1.x, `attach` refuses it): fix the setup. Another
  `ContextMiddleware`'s `read_file` is accepted when it can read this one's `tool_result/`.
- Media blocks pass through: the agent limits images itself (`max_image_num`).
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentscope.agent import ContextConfig as AgentContextConfig
from agentscope.event import AgentEvent
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolBase, ToolChunk, Toolkit, ToolResponse

from .._config import ContextConfig
from .._errors import ContextUsageError, OffloadError
from .._failures import FailureLog
from .._middleware import block_budget, clean_text, offload_text
from .._read_file import FileReader
from .._tool_results import ToolResultPolicy, ToolResultStore
from ._read_file import READ_FILE, ReadFileTool

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = ["ContextMiddleware"]

logger = logging.getLogger("agentscope_ctx")

_AGENT_DEFAULT_LIMIT = AgentContextConfig.model_fields["tool_result_limit"].default
"""AgentScope's default `tool_result_limit`: raising it is routine, not worth a warning."""

ReplyItem = AgentEvent | Msg
ActingItem = ToolChunk | ToolResponse


class ContextMiddleware(MiddlewareBase):
    """The 2.x adapter: a middleware for `Agent(..., middlewares=[...])`.

    Args:
        config: all settings (the same `ContextConfig` as on 1.x); default settings if
            `None`.
    """

    def __init__(self, config: ContextConfig | None = None) -> None:
        self.config = config or ContextConfig()
        working_dir = self.config.working_dir.resolve()
        self.store = ToolResultStore(working_dir, self.config.tool_result.retention_days)
        self.policy = ToolResultPolicy(self.config.tool_result)
        roots = self.config.read_roots or [working_dir, Path.cwd()]
        self.reader = FileReader(roots, self.policy, store_dir=self.store.dir)
        self.read_file = ReadFileTool(self.reader)
        self.failures = FailureLog()
        self._ready: weakref.WeakSet[Toolkit] = weakref.WeakSet()
        """Toolkits that had a usable `read_file` at the start of the current reply."""

    async def list_tools(self) -> list[ToolBase]:
        """The tools this middleware needs in the agent's toolkit: `read_file`."""
        return [self.read_file]

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, object],
        next_handler: Callable[..., AsyncGenerator[ReplyItem, None]],
    ) -> AsyncGenerator[ReplyItem, None]:
        """Make sure the agent's toolkit has `read_file`, then reply as usual."""
        await self._install(agent)
        async for item in next_handler(**input_kwargs):
            yield item

    async def on_acting(
        self,
        agent: Agent,
        input_kwargs: dict[str, object],
        next_handler: Callable[..., AsyncGenerator[ActingItem, None]],
    ) -> AsyncGenerator[ActingItem, None]:
        """Run the tool; cut its final response (what the agent stores) to the limit."""
        tool_call = input_kwargs["tool_call"]
        limit = self._limit(agent, tool_call) if isinstance(tool_call, ToolCallBlock) else None
        async for item in next_handler(**input_kwargs):
            if limit is not None and isinstance(item, ToolResponse):
                item = await self._cut(item, limit)
            yield item

    # -- internals ---------------------------------------------------------------------

    async def _install(self, agent: Agent) -> None:
        """At the start of every reply: take over the agent's own cut of tool results, and
        add `read_file` to its toolkit if it is not there (cut nothing if that fails).

        Raises:
            ContextUsageError: the toolkit has another tool named `read_file`.
        """
        self._own_truncation(agent)
        toolkit = agent.toolkit
        self._ready.discard(toolkit)
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
        except ContextUsageError:
            raise
        except Exception as exc:  # a broken toolkit must not end the reply: cut nothing
            self.failures.failed(
                "read_file",
                f"cannot add {READ_FILE} to the toolkit of agent {agent.name!r}, so tool "
                f"output is not cut: {exc}",
            )
            return
        self.failures.recovered("read_file")
        self._ready.add(toolkit)

    def _own_truncation(self, agent: Agent) -> None:
        """Raise the agent's `tool_result_limit` (tokens) to our largest byte limit."""
        needed = max(self.policy.standard.recent, self.policy.markdown.recent)
        current = agent.context_config.tool_result_limit
        if current >= needed:
            return
        logger.log(
            logging.INFO if current == _AGENT_DEFAULT_LIMIT else logging.WARNING,
            "agentscope_ctx: raising the tool_result_limit of agent %r from %d to %d tokens: "
            "agentscope_ctx cuts tool output itself, losslessly (ToolResultConfig sets the "
            "limits); the agent's own cut would drop the rest of an output",
            agent.name,
            current,
            needed,
        )
        agent.context_config = agent.context_config.model_copy(update={"tool_result_limit": needed})

    def _usable(self, tool: ToolBase) -> bool:
        """Whether `tool` is a `read_file` of this package that reads this store."""
        if tool is self.read_file:
            return True
        return isinstance(tool, ReadFileTool) and any(
            self.store.dir.is_relative_to(root) for root in tool.reader.roots
        )

    def _limit(self, agent: Agent, tool_call: ToolCallBlock) -> int | None:
        """The byte limit of this call's output, or `None` to leave it whole."""
        if tool_call.name == READ_FILE or agent.toolkit not in self._ready:
            return None  # read_file cuts its own output and points at the file it read
        try:
            arguments = json.loads(tool_call.input or "{}")
        except ValueError:
            arguments = {}
        return self.policy.limits(
            tool_call.name, arguments if isinstance(arguments, dict) else {}
        ).recent

    async def _cut(self, response: ToolResponse, limit: int) -> ToolResponse:
        """`response` with each text block cut to its share of `limit` (saved first)."""
        try:
            texts = [i for i, block in enumerate(response.content) if isinstance(block, TextBlock)]
            if not texts:
                return response
            per_block = block_budget(limit, len(texts))
            content = list(response.content)
            for i in texts:
                block = content[i]
                assert isinstance(block, TextBlock)
                text = clean_text(block.text)
                try:
                    text = await offload_text(text, per_block, self.store)
                except OffloadError as exc:
                    # Nothing is cut that is not saved: this output stays whole.
                    self.failures.failed("tool_result", f"keeping tool output whole: {exc}")
                else:
                    self.failures.recovered("tool_result")
                if text != block.text:
                    content[i] = block.model_copy(update={"text": text})
            return response.model_copy(update={"content": content})
        except Exception:  # a bug here must not end the reply: the output stays whole
            logger.exception("agentscope_ctx: could not cut a tool output; it stays whole")
            return response
