"""What a 2.x `Agent` does around its own compression that agentscope_ctx, which replaces
that compression, must do too: the read cache and the agent's offloader (the image cap is
`_images`).

- **Read cache** (`clean_read_cache`): AgentScope's built-in `Read` caches what it read in
  `state.tool_context`, and `Edit`/`Write` accept an edit only to a file in that cache.
  After a run of the pipeline that removed or cut messages, the cache keeps only the files
  whose `Read` the model still sees: a `Read` call still in the context whose result is not
  masked (reduced to its notice). An excerpt with its notice counts as seen (the lossless
  chain reads on), as AgentScope's own head-and-reminder cut does.
- **Offloader copies** (`offload_output`, `offload_left`): when the agent has an
  `offloader` (its workspace: local, docker, e2b, k8s, ...), a tool output we cut is also
  written there whole (`offload_tool_result`), and the messages a compaction moved out of
  the context too (`offload_context`; the summary then ends with AgentScope's reminder naming
  that file). `tool_result/` and `dialog/` stay the source of truth (the notice and the
  summary's guide point there, `read_file` and `search_history` read there); the workspace
  gets a copy, for the agent's own file tools and the app. A failing offloader is logged
  and the reply goes on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agentscope.message import (
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

from ..core.truncation._truncation import parse_notice, utf8_len

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = [
    "MASKED_EXCERPT_BYTES",
    "clean_read_cache",
    "offload_left",
    "offload_output",
    "offload_reminder",
    "read_paths_seen",
]

logger = logging.getLogger("agentscope_ctx")

READ_TOOL = "Read"
"""AgentScope's built-in file reader, whose results fill the read cache."""

MASKED_EXCERPT_BYTES = 4
"""A result whose excerpt is this small is masked: the model sees its notice alone."""


# -- read cache --------------------------------------------------------------------------


def _masked(output: object) -> bool:
    texts = (
        [output]
        if isinstance(output, str)
        else [b.text for b in output if isinstance(b, TextBlock)]
        if isinstance(output, list)
        else []
    )
    if not texts:
        return False
    for text in texts:
        parsed = parse_notice(text)
        if parsed is None or utf8_len(parsed[0]) > MASKED_EXCERPT_BYTES:
            return False
    return True


def read_paths_seen(context: Iterable[Msg]) -> set[str]:
    """The `file_path`s of the `Read` calls in `context` whose result the model still sees
    (not masked; a call still running counts)."""
    calls: dict[str, str] = {}
    masked: set[str] = set()
    for msg in context:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if isinstance(block, ToolCallBlock) and block.name == READ_TOOL:
                try:
                    arguments = json.loads(block.input or "{}")
                except ValueError:
                    continue
                path = arguments.get("file_path") if isinstance(arguments, dict) else None
                if isinstance(path, str):
                    calls[block.id] = path
            elif isinstance(block, ToolResultBlock) and _masked(block.output):
                masked.add(block.id)
    return {path for call_id, path in calls.items() if call_id not in masked}


async def clean_read_cache(agent: Agent) -> None:
    """Drop the read-cache entries of files whose `Read` the model no longer sees."""
    tool_context = agent.state.tool_context
    if not tool_context.read_file_cache:
        return  # the common case (no built-in Read in use): no scan
    seen = read_paths_seen(agent.state.context)
    dropped = [e.file_path for e in tool_context.read_file_cache if e.file_path not in seen]
    if dropped:
        await tool_context.clean_file_cache(reserved_file_paths=seen)
        logger.info(
            "agentscope_ctx: agent %r: read cache cleared for %d file(s) the model no longer "
            "sees (an edit needs a new Read): %s",
            agent.name,
            len(dropped),
            ", ".join(dropped),
        )


# -- offloader copies -------------------------------------------------------------------


def offload_reminder(path: str) -> str:
    """AgentScope's words for where the compressed context went."""
    return (
        f"<system-reminder>The compressed context is offloaded to '{path}', you can refer to "
        "it when needed.</system-reminder>"
    )


async def offload_output(agent: Agent, call: ToolCallBlock, content: list[Any]) -> str | None:
    """A copy of a whole tool output in the agent's workspace; its path, or `None`."""
    offloader = getattr(agent, "offloader", None)
    if offloader is None:
        return None
    try:
        block = ToolResultBlock(id=call.id, name=call.name, output=content)
        return str(await offloader.offload_tool_result(agent.state.session_id, block))
    except Exception:
        logger.exception("agentscope_ctx: could not copy a tool output to the agent's offloader")
        return None


def left_context(before: Sequence[Msg], after: Sequence[Msg]) -> list[Msg]:
    """The blocks of `before` that are not in `after` (by block id), as messages."""
    kept = {block.id for msg in after if not isinstance(msg.content, str) for block in msg.content}
    kept_msgs = {msg.id for msg in after}
    out: list[Msg] = []
    for msg in before:
        if isinstance(msg.content, str):
            if msg.id not in kept_msgs:
                out.append(msg)
            continue
        gone = [block for block in msg.content if block.id not in kept]
        if gone and len(gone) == len(msg.content):
            out.append(msg)
        elif gone:
            out.append(msg.model_copy(update={"content": gone}))
    return out


async def offload_left(agent: Agent, before: Sequence[Msg]) -> str | None:
    """A copy of what a compaction moved out of `agent`'s context, in its workspace; the
    file's path, or `None` (no offloader, nothing left, or it failed: logged)."""
    offloader = getattr(agent, "offloader", None)
    if offloader is None:
        return None
    msgs = left_context(before, agent.state.context)
    if not msgs:
        return None
    try:
        return str(await offloader.offload_context(agent.state.session_id, msgs=msgs))
    except Exception:
        logger.exception("agentscope_ctx: could not copy the compacted context to the offloader")
        return None
