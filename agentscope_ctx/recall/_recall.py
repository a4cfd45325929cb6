"""Recall (DESIGN.md §10): the `search_history` tool of an attached agent, and its config.

`Recall` is one agent's view of the working dir's `SearchIndex`: it names the agent on what
the agent saves (dialog records, saved outputs), answers `search_history` within the agent's
scope, and tells the index which tool made each saved output. `format_result` renders a
search for the agent and for the ``agentscope-ctx search`` command alike.

Records are owned by the agent's tenant (`core._tenant`: its agent key, from the agent's
*name*, stable across restarts unlike ``agent.id``, and the user; and its session), and a
search shows what the tenant's scope sees (`RecallConfig.scope`, DESIGN.md §15): by default
its own agent in its own session.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from agentscope.message import TextBlock
from agentscope.tool import ToolResponse

from ..core._errors import ContextError
from ..core._failures import FailureLog
from ..core._tenant import Tenant
from ..core.config._config import RecallConfig
from ..core.search._search_hits import MAX_HITS, ROLES, Filters, format_result, parse_time
from ..core.search._search_text import SEARCH_TOOL, key_args
from ..core.summary._eviction import eviction_index
from ..core.truncation._truncation import parse_notice
from ..stores.seams import SearchSeam

__all__ = [
    "MAX_HITS",
    "ROLES",
    "Recall",
    "RecallConfig",
    "eviction_index",
    "format_result",
    "parse_time",
]

logger = logging.getLogger("agentscope_ctx")


class Recall:
    """One attached agent's recall: `search_history`, and the listeners that name the agent
    and the tool on what it saves (see the module docstring)."""

    def __init__(
        self,
        index: SearchSeam,
        config: RecallConfig,
        agent_name: str,
        *,
        max_output_bytes: int | None = None,
        failures: FailureLog | None = None,
        tenant: Tenant | None = None,
    ) -> None:
        """Create the recall of one agent.

        Args:
            index: The working dir's index.
            config: The recall settings.
            agent_name: The owner named on records and the default scope.
            max_output_bytes: A cap below `config.max_output_bytes` (the manager passes
                `tool_result.old_max_bytes`, so an answer is never cut).
            failures: Where a failing hook is logged once.
            tenant: The owner of what it saves and the scope of its searches (default: the
                agent in `config.session`, of `config.user`, with `config.scope`).
        """
        self.index = index
        self.config = config
        self.agent_name = agent_name
        cap = config.max_output_bytes
        self.max_output_bytes = cap if max_output_bytes is None else min(cap, max_output_bytes)
        self.failures = failures or FailureLog()
        self.tenant = tenant or Tenant.of(
            agent_name, config.session, user=config.user, scope=config.scope
        )

    @property
    def record_fields(self) -> dict[str, str]:
        """The fields the dialog store writes on this agent's records."""
        return self.tenant.fields

    def output_saved(self, ref: str | os.PathLike[str]) -> None:
        """The output store's listener: index a saved output as this agent's."""
        self.index.output_saved(
            os.fspath(ref), agent=self.tenant.agent, session=self.tenant.session
        )

    async def search_history(
        self,
        query: str,
        role: str | None = None,
        tool: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int | None = None,
    ) -> ToolResponse:
        """Search what left the context: earlier messages (dialog/), saved tool outputs
        (tool_result/), memory (memory/). Each hit shows the matching lines and where to read
        on with `read_file`.

        Args:
            query (str): words (all, else any); "a phrase" matches exactly; word* a prefix.
            role (str | None): "user", "assistant", "system", "tool" or "memory".
            tool (str | None): only this tool's calls and outputs.
            since (str | None): from this local time: "2026-12-02" or "2026-12-02 14:30".
            until (str | None): up to this local time (a date: its whole day).
            limit (int | None): hits (default 5, at most 20).
        """
        try:
            text = await asyncio.to_thread(
                self._search, str(query or ""), role, tool, since, until, limit
            )
        except (ValueError, ContextError) as exc:
            text = f"Error: {exc}"
        return ToolResponse(content=[TextBlock(type="text", text=text)])

    def _search(
        self,
        query: str,
        role: str | None,
        tool: str | None,
        since: str | None,
        until: str | None,
        limit: int | None,
    ) -> str:
        role = (role or "").strip().lower() or None
        if role is not None and role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}")
        if isinstance(limit, bool) or not isinstance(limit, (int, float, type(None))):
            raise ValueError(f"limit must be a number; got {limit!r}")
        count = self.config.max_hits if not limit else max(1, min(int(limit), MAX_HITS))
        shared = self.tenant.scope == "shared"
        filters = Filters(
            tenant=self.tenant,
            role=role,
            tool=(tool or "").strip() or None,
            since=parse_time(since, "since"),
            until=parse_time(until, "until"),
        )
        result = self.index.search(
            query, filters, limit=count, catch_up_seconds=self.config.catch_up_seconds
        )
        return format_result(
            result,
            query,
            shared=shared,
            max_bytes=self.max_output_bytes,
            sources=self.index.sources,
        )

    async def post_acting(self, agent: Any, kwargs: dict[str, Any], output: Any) -> None:
        """The agent's ``post_acting`` hook: name the tool (and its key arguments) whose
        output was just saved, read from the notice of its result. Never raises."""
        try:
            call = kwargs.get("tool_call") or {}
            if call.get("name") == SEARCH_TOOL:
                return
            paths = _saved_paths(getattr(agent.memory, "content", []), str(call.get("id")))
            tool_input = call.get("input")
            args = key_args(tool_input if isinstance(tool_input, dict) else {})
            await self.describe_saved(paths, str(call.get("name")), args)
        except Exception as exc:  # naming the tool is a nicety: never fail the agent
            self.failures.failed("recall", f"could not name a saved output's tool: {exc}")

    async def describe_saved(self, paths: list[str], tool: str, args: str) -> None:
        """Tell the index which tool (with which key arguments) made the saved outputs at
        `paths`. Never raises."""
        try:
            for path in paths:
                await asyncio.to_thread(self.index.describe_output, path, tool=tool, args=args)
        except Exception as exc:  # naming the tool is a nicety: never fail the agent
            self.failures.failed("recall", f"could not name a saved output's tool: {exc}")


def _saved_paths(content: list[Any], call_id: str) -> list[str]:
    """The saved-output paths in the notices of the newest tool result answering `call_id`."""
    for item in reversed(content[-8:]):
        msg = item[0] if isinstance(item, tuple) else item
        for block in msg.get_content_blocks("tool_result"):
            if str(block.get("id")) != call_id:
                continue
            output = block.get("output")
            texts = [output] if isinstance(output, str) else output or []
            found = []
            for text in texts:
                text = text.get("text") if isinstance(text, dict) else text
                parsed = parse_notice(text) if isinstance(text, str) else None
                if parsed is not None:
                    found.append(parsed[1].file_path)
            return found
    return []
