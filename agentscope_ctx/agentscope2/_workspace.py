"""What a 2.x `Agent` does around its own compression that agentscope_ctx, which replaces
that compression, must do too: the image cap, the read cache, and the agent's offloader.

- **Image cap** (`cap_images`): at most `context_config.max_image_num` images stay in the
  context (AgentScope's default is 5; providers with an image cap reject more). The oldest
  are replaced by a notice, as AgentScope words it. Nothing is lost: an image with a URL is
  named by its URL; an inline (base64) image is saved first, through the agent's
  `offloader` when it has one (a ``workspace://`` URL, where the agent's own tools look),
  else to ``working_dir/media/<sha256>.<ext>`` (the notice names that file). AgentScope
  without an offloader drops the image ("is removed to free up context space"); we keep it.
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

import asyncio
import base64
import hashlib
import json
import logging
import mimetypes
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    URLSource,
)

from ..core._truncation import parse_notice, utf8_len

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = [
    "MASKED_EXCERPT_BYTES",
    "ImageCounts",
    "cap_images",
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


# -- image cap -------------------------------------------------------------------------


def _is_image(block: object) -> bool:
    return isinstance(block, DataBlock) and block.source.media_type.startswith("image/")


ImageCounts = dict[str, tuple[Msg, int, int]]
"""By message id: the message object, its block count, its number of images (a cache that
keeps the check O(changed messages): a 2.x agent keeps unchanged messages as the same
objects and only appends blocks to its live reply)."""


def _in_message(msg: Msg) -> list[tuple[int, int | None]]:
    found: list[tuple[int, int | None]] = []
    if isinstance(msg.content, str):
        return found
    for b, block in enumerate(msg.content):
        if _is_image(block):
            found.append((b, None))
        elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
            found.extend((b, j) for j, sub in enumerate(block.output) if _is_image(sub))
        elif isinstance(block, HintBlock) and isinstance(block.hint, list):
            found.extend((b, j) for j, sub in enumerate(block.hint) if _is_image(sub))
    return found


def _count(context: Sequence[Msg], counts: ImageCounts) -> int:
    total = 0
    seen: ImageCounts = {}
    for msg in context:
        known = counts.get(msg.id)
        n_blocks = 0 if isinstance(msg.content, str) else len(msg.content)
        if known is None or known[0] is not msg or known[1] != n_blocks:
            known = (msg, n_blocks, len(_in_message(msg)))
        seen[msg.id] = known
        total += known[2]
    counts.clear()
    counts.update(seen)
    return total


def _images(context: Sequence[Msg]) -> list[tuple[int, int, int | None]]:
    """Where the images are, oldest first: (message, block, index inside the block's
    output or hint list, or `None` at the top level)."""
    return [(m, b, j) for m, msg in enumerate(context) for b, j in _in_message(msg)]


def _image_at(block: object, j: int | None) -> DataBlock:
    if isinstance(block, ToolResultBlock) and isinstance(block.output, list) and j is not None:
        block = block.output[j]
    elif isinstance(block, HintBlock) and isinstance(block.hint, list) and j is not None:
        block = block.hint[j]
    assert isinstance(block, DataBlock)
    return block


async def _saved_url(agent: Agent, block: DataBlock, media_dir: Path) -> str:
    """Where the image can be found again (saved first when it is inline)."""
    if isinstance(block.source, URLSource):
        return str(block.source.url)
    offloader = getattr(agent, "offloader", None)
    if offloader is not None:
        saved = await offloader.offload_data_block(block)
        if isinstance(saved.source, URLSource):
            return str(saved.source.url)
    source = block.source
    assert isinstance(source, Base64Source)
    digest = hashlib.sha256(source.data.encode()).hexdigest()
    path = media_dir / f"{digest}{mimetypes.guess_extension(source.media_type) or '.bin'}"

    def write() -> None:
        if not path.exists():
            media_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(base64.b64decode(source.data))
            tmp.replace(path)

    await asyncio.to_thread(write)
    return str(path)


async def cap_images(agent: Agent, media_dir: Path, counts: ImageCounts | None = None) -> int:
    """Replace the oldest images over the agent's `max_image_num` by a notice (saved
    first); the number replaced. Changed messages are replaced by copies (block ids kept),
    so that a mirror of the state sees the change. `counts` (kept by the caller between
    calls) makes the check cheap when nothing changed."""
    limit = getattr(agent.context_config, "max_image_num", None)
    context = agent.state.context
    if not isinstance(limit, int) or _count(context, {} if counts is None else counts) <= limit:
        return 0
    images = _images(context)
    excess = images[: len(images) - limit]
    notices: dict[tuple[int, int, int | None], str] = {}
    for m, b, j in excess:  # save all first: an interruption leaves the context unchanged
        image = _image_at(context[m].content[b], j)
        url = await _saved_url(agent, image, media_dir)
        name = f"named '{image.name}' " if image.name else ""
        notices[(m, b, j)] = (
            f"<system-reminder>The image {name}is offloaded into {url}, you can refer to it "
            "when needed.</system-reminder>"
        )
    for m in sorted({m for m, _, _ in excess}):
        msg = context[m]
        blocks = list(msg.content)
        for (mm, b, j), text in notices.items():
            if mm != m:
                continue
            block = blocks[b]
            if j is None:
                if msg.role == "user":
                    blocks[b] = TextBlock(id=block.id, text=text)
                else:
                    blocks[b] = HintBlock(id=block.id, hint=text)
            elif isinstance(block, ToolResultBlock) and isinstance(block.output, list):
                output = list(block.output)
                output[j] = TextBlock(id=output[j].id, text=text)
                blocks[b] = block.model_copy(update={"output": output})
            elif isinstance(block, HintBlock) and isinstance(block.hint, list):
                hint = list(block.hint)
                hint[j] = TextBlock(id=hint[j].id, text=text)
                blocks[b] = block.model_copy(update={"hint": hint})
        context[m] = msg.model_copy(update={"content": blocks})
    logger.info(
        "agentscope_ctx: agent %r: %d images in the context, over max_image_num=%d: the "
        "oldest %d saved and replaced by a notice",
        agent.name,
        len(images),
        limit,
        len(excess),
    )
    return len(excess)


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
