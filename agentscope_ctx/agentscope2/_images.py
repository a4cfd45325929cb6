"""The image cap of a 2.x agent (`cap_images`), which AgentScope applies in its own
compression and agentscope_ctx, replacing that compression, applies before each model call.

At most `context_config.max_image_num` images stay in the context (AgentScope's default is
5; providers with an image cap reject more). The oldest are replaced by a notice, as
AgentScope words it. Nothing is lost: an image with a URL is named by its URL; an inline
(base64) image is saved first, through the agent's `offloader` when it has one (a
``workspace://`` URL, where the agent's own tools look), else, or when the offloader fails,
to ``working_dir/media/<sha256>.<ext>`` (private: the folder ``0700``, each file ``0600``,
as everything the package writes), and the notice names that file. AgentScope without an
offloader drops the image ("is removed to free up context space"); we keep it.

An image that cannot be saved does not lift the cap (the cap is what the provider enforces):
- inline data that is not valid base64 is no image a provider can read; its data is saved as
  received, as text, to ``working_dir/media/<sha256>.base64.txt``, and the notice says so;
- an image that cannot be written at all (the media folder not writable, the disk full) is
  still removed from the context, by a notice that says it could not be saved and why; this
  is the one case where an image is lost, and it is logged as an error.
Each image is handled on its own: one failure leaves the others saved and replaced.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import mimetypes
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentscope.message import (
    Base64Source,
    DataBlock,
    HintBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    URLSource,
)

from ..core._private import private_dir, write_atomic

if TYPE_CHECKING:
    from agentscope.agent import Agent

__all__ = ["ImageCounts", "cap_images"]

logger = logging.getLogger("agentscope_ctx")

_SPACE = re.compile(rb"\s+")


def _is_image(block: object) -> bool:
    return isinstance(block, DataBlock) and block.source.media_type.startswith("image/")


ImageCounts = dict[str, tuple[Msg, int, int]]
"""By message id: the message object, its block count, its number of images (a cache that
keeps the check O(changed messages): a 2.x agent keeps unchanged messages as the same
objects and only appends blocks to its live reply)."""


def _in_message(msg: Msg, start: int = 0) -> list[tuple[int, int | None]]:
    """Where `msg`'s images are (from its block `start` on)."""
    found: list[tuple[int, int | None]] = []
    if isinstance(msg.content, str):
        return found
    for b, block in enumerate(msg.content[start:], start):
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
        if known is not None and known[0] is msg and 0 < known[1] < n_blocks:
            # grown by appended blocks (the live reply): only those are looked at
            known = (msg, n_blocks, known[2] + len(_in_message(msg, known[1])))
        elif known is None or known[0] is not msg or known[1] != n_blocks:
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


def _media_file(media_dir: Path, data: str, suffix: str, payload: bytes) -> Path:
    """Write `payload` once to ``media_dir/<sha256 of data><suffix>``, private."""
    digest = hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
    path = media_dir / f"{digest}{suffix}"
    private_dir(media_dir)  # made 0700, or tightened (with its files) when an older one is not
    if not path.exists():
        write_atomic(path, payload)
    return path


def _save_inline(source: Base64Source, media_dir: Path) -> tuple[str, bool]:
    """Save an inline image to `media_dir`: the path, and whether it is the image (else its
    data as received, which is not valid base64)."""
    raw = source.data.encode("utf-8", "surrogatepass")
    try:
        payload = base64.b64decode(_SPACE.sub(b"", raw), validate=True)
    except (binascii.Error, ValueError):
        return str(_media_file(media_dir, source.data, ".base64.txt", raw)), False
    ext = mimetypes.guess_extension(source.media_type) or ".bin"
    return str(_media_file(media_dir, source.data, ext, payload)), True


async def _notice(agent: Agent, block: DataBlock, media_dir: Path) -> str:
    """The text that replaces `block`, the image saved first (see the module docstring)."""
    name = f"named '{block.name}' " if block.name else ""
    if isinstance(block.source, URLSource):
        url = str(block.source.url)
    else:
        url = ""
        offloader = getattr(agent, "offloader", None)
        if offloader is not None:
            try:
                saved = await offloader.offload_data_block(block)
                if isinstance(saved.source, URLSource):
                    url = str(saved.source.url)
            except Exception:
                logger.exception(
                    "agentscope_ctx: agent %r: the offloader could not save an image; saving "
                    "it to the media folder",
                    agent.name,
                )
        if not url:
            source = block.source
            assert isinstance(source, Base64Source)
            try:
                url, is_image = await asyncio.to_thread(_save_inline, source, media_dir)
            except Exception as exc:
                logger.error(
                    "agentscope_ctx: agent %r: an image %scould not be saved (%s); removed "
                    "from the context all the same (max_image_num)",
                    agent.name,
                    name,
                    exc,
                )
                return (
                    f"<system-reminder>The image {name}is removed to free up context space; "
                    f"it could not be saved ({type(exc).__name__}).</system-reminder>"
                )
            if not is_image:
                logger.warning(
                    "agentscope_ctx: agent %r: an image %sis not valid base64; its data is "
                    "saved as received in %s",
                    agent.name,
                    name,
                    url,
                )
                return (
                    f"<system-reminder>The image {name}is not valid base64 data; it is "
                    f"removed, and its data as received is saved into {url}, you can refer to it "
                    "when needed.</system-reminder>"
                )
    return (
        f"<system-reminder>The image {name}is offloaded into {url}, you can refer to it "
        "when needed.</system-reminder>"
    )


async def cap_images(agent: Agent, media_dir: Path, counts: ImageCounts | None = None) -> int:
    """Replace the oldest images over the agent's `max_image_num` by a notice (each saved
    first, where it can be: see the module docstring); the number replaced, which is every
    image over the cap, whether or not it could be saved. Changed messages are replaced by
    copies (block ids kept), so that a mirror of the state sees the change. `counts` (kept
    by the caller between calls) makes the check cheap when nothing changed."""
    limit = getattr(agent.context_config, "max_image_num", None)
    context = agent.state.context
    if not isinstance(limit, int) or _count(context, {} if counts is None else counts) <= limit:
        return 0
    images = _images(context)
    excess = images[: len(images) - limit]
    notices: dict[tuple[int, int, int | None], str] = {}
    for m, b, j in excess:  # save all first: an interruption leaves the context unchanged
        notices[(m, b, j)] = await _notice(agent, _image_at(context[m].content[b], j), media_dir)
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
