"""`Cutter`: cuts the parts of one message to byte limits, losslessly (DESIGN.md §4).

Every part that is cut is first saved whole to `tool_result/` and replaced by an excerpt and
a notice pointing at the file. A part that cannot be saved stays whole in memory, and the
model is shown a marked cut of it instead (`Cut.view`), until the disk works again.

The parts: tool outputs (their text, and their media, which AgentScope's formatters render
as text inside a tool result: a ``data:`` URL there is megabytes of text), the string
arguments of tool calls (a model may write a 400 KB file through one), and, as a last resort,
the text and media of any message.

A notice is trusted (and the text cut harder from it, `retruncate`) only when this package
wrote it: the output of its own `read_file`, or a notice naming a file of the store that
begins with the excerpt. Anything else that merely ends like a notice is content: it is saved
and cut like any text, so that nothing a tool returned is dropped on a forged notice's word.

`read_file` output that the model has seen is snapshotted before it shrinks (issue 19.1). Its
notice points at the file that was read, which may be a workspace file the agent edits later:
cut harder from that notice, the chain would go on in today's file, not in what the agent was
shown. So a harder cut of a `read_file` output whose notice names a file outside the store
(second truncation, masking, the last-resort fit) saves the output itself, excerpt and notice
byte for byte as the model saw it, to `tool_result/` like any other output (indexed for
`search_history`), and cuts it from there; the chain then runs through the snapshot and ends
with the original notice, so the agent can still read on in the live file. The text saved is
the one held in the context, which is exactly what was shown: a copy of the file taken now
would hold the edited content. Nothing is copied when the output first enters the context
(reading a file stays free), nor when its notice names a file of the store (never rewritten),
nor when a harder cut would not shrink it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._entry import Msg
from .._errors import OffloadError
from .._failures import FailureLog
from ..search._search_text import key_args
from ..tokens._tokens import TokenCounter
from ..truncation._offload import block_budget, clean_text, offload_text
from ..truncation._truncation import (
    Position,
    head,
    notice_paths,
    parse_notice,
    retruncate,
    utf8_len,
)

if TYPE_CHECKING:  # annotations only: the caller passes the store in
    from .._seams import OutputSeam
    from ._tool_policy import ToolResultPolicy

__all__ = ["MEDIA_KINDS", "READ_FILE", "Calls", "Cut", "Cutter", "Describe", "unsaved_excerpt"]

READ_FILE = "read_file"
"""The package's continuation tool: its output's notices are its own."""
MEDIA_KINDS = frozenset({"image", "audio", "video"})
_MASK_BYTES = 4
"""Limit of a masked part: the notice alone, with a character or so of excerpt."""
_MIN_FRESH_BYTES = 1_024
"""A fresh excerpt is never cut below this by the token cap."""
_MASK_MIN_BYTES = 768
"""Parts this small are left as they are by masking: their notice would be longer."""
_SHORT_MIN_BYTES = 512
"""The same for the last resort (`short`): a notice is about 360 bytes (115 tokens), and a
part of more than 512 bytes is worth more in Chinese, and about as much in English."""

Calls = Mapping[str, tuple[str, dict[str, Any]]]
"""Tool calls by id: (tool name, arguments), to find the limits of their results."""
Describe = Callable[[list[str], str, str], Awaitable[None]]
"""Names the tool and its key arguments on outputs just saved: (paths, tool, args)."""


@dataclass
class Cut:
    """The outcome of cutting one message."""

    content: list[Any] | None = None
    """The new content to store (parts saved to disk and cut); `None` when unchanged."""
    view: list[Any] | None = None
    """What the model is shown instead, when some part could not be saved; else `None`."""

    @property
    def changed(self) -> bool:
        return self.content is not None or self.view is not None


def unsaved_excerpt(text: str, max_bytes: int) -> str:
    """What the model is shown of a text that could not be saved: its head, and a note
    that the rest is kept in memory (not a notice: there is no file to read on from)."""
    note = (
        f"\n[agentscope_ctx: the rest of this output ({utf8_len(text)} bytes in all) is not "
        "shown: it could not be saved to disk. It is kept in memory, and saved and readable "
        "with read_file once the disk works again.]"
    )
    return head(text, max(max_bytes - utf8_len(note), 4)) + note


def media_text(block: Mapping[str, Any]) -> str | None:
    """A media block as AgentScope's formatters render it inside a tool result, or `None`
    when it has no usable source."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "url":
        url = str(source.get("url", ""))
    elif source.get("type") == "base64":
        url = f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
    else:
        return None
    return f"The returned {block.get('type')} can be found at: {url}"


def _is_data_url(block: Mapping[str, Any]) -> bool:
    source = block.get("source")
    return isinstance(source, Mapping) and str(source.get("url", "")).startswith("data:")


class Cutter:
    """Cuts messages' parts with the limits of `policy`, saving to `store` first."""

    def __init__(
        self,
        store: OutputSeam,
        policy: ToolResultPolicy,
        failures: FailureLog | None = None,
        *,
        counter: TokenCounter | None = None,
        token_cap: int | None = None,
        describe: Describe | None = None,
    ) -> None:
        """Args:
        store: where cut parts are saved.
        policy: the byte limits per tool and path.
        failures: where failures to save are reported (once).
        counter: with `token_cap`, bounds a fresh output's excerpt in tokens too.
        token_cap: most tokens of a fresh output's excerpt.
        describe: told which tool made the tool outputs it saves (the recall's index
            names them in its hits and filters by tool).
        """
        self.store = store
        self.policy = policy
        self.failures = failures or FailureLog()
        self.counter = counter
        self.token_cap = token_cap
        self.describe = describe
        self.saved_refs = 0
        """Outputs saved and cut by this cutter so far (the pipeline's report takes the
        difference over a run)."""
        self.saved_bytes = 0
        """Their size, in UTF-8 bytes."""

    async def fresh_limit(self, text: str, limit: int) -> int:
        """`limit` for a fresh output, lowered so that the excerpt is worth at most
        `token_cap` tokens (tokens per byte estimated from the text's head)."""
        if self.counter is None or self.token_cap is None or utf8_len(text) <= self.token_cap:
            return limit  # a token is at least a byte: this text is within the cap
        sample = text[:8_192]
        per_token = utf8_len(sample) / max(await self.counter.count_text(sample), 1)
        return max(min(limit, int(self.token_cap * per_token)), _MIN_FRESH_BYTES)

    def trusted(self, text: str, *, tool: str = "") -> bool:
        """Whether `text` ends with a notice this package wrote (see the module docstring)."""
        parsed = parse_notice(text)
        if parsed is None:
            return False
        excerpt, notice = parsed
        if tool == READ_FILE:
            return True
        return notice.start == Position() and self.store.holds(notice.file_path, excerpt)

    async def text(
        self, raw: object, limit: int, *, tool: str = "", shown: bool = False, short: bool = False
    ) -> tuple[str, str]:
        """(text to keep, text to show) for `raw` within `limit` bytes. The kept text is cut
        only once the full text is saved; when saving fails it stays whole and the model is
        shown a marked cut of it. A `limit` of `_MASK_BYTES` masks: the notice alone, except
        for texts too short for that to help (`short`, the last resort: shorter ones too).
        `shown`: the model has seen `raw` (a harder cut): a `read_file` output pointing
        outside the store is then snapshotted first (see the module docstring)."""
        text = clean_text(raw)
        least = _SHORT_MIN_BYTES if short else _MASK_MIN_BYTES
        if limit <= _MASK_BYTES and utf8_len(text) <= least:
            return text, text
        if self.trusted(text, tool=tool):
            shorter = retruncate(text, max_bytes=limit)
            if shorter == text or not (shown and self._points_outside(text, tool)):
                return shorter, shorter
        try:
            cut = await offload_text(text, limit, self.store)
        except OffloadError as exc:
            self.failures.failed("tool_result", f"keeping tool output whole: {exc}")
            return text, unsaved_excerpt(text, limit)
        self.failures.recovered("tool_result")
        if cut != text:
            self.saved_refs += 1
            self.saved_bytes += utf8_len(text)
        return cut, cut

    def _points_outside(self, text: str, tool: str) -> bool:
        """Whether `text` is a `read_file` output whose notice names a file that may change
        (any file but the store's own)."""
        parsed = parse_notice(text) if tool == READ_FILE else None
        return parsed is not None and not self.store.owns(parsed[1].file_path)

    async def cut(
        self,
        msg: Msg,
        calls: Calls,
        *,
        old: bool,
        mask: bool = False,
        everything: bool = False,
        short: bool = False,
    ) -> Cut:
        """Cut the tool outputs and tool arguments of `msg` to their recent (or `old`) limits,
        or with `mask` to their notices alone.

        Media in a tool result are reduced to their notice once `old` (a ``data:`` URL
        always). With `everything` (the last resort), the text and media of every block are
        cut too, to the old limits (with `mask`, to their notices). With `short` (the last
        resort), masking takes parts down to `_SHORT_MIN_BYTES`."""
        content = msg.content
        if isinstance(content, str):
            if not everything:
                return Cut()
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            blocks = list(content)
        else:
            return Cut()
        kept, shown = list(blocks), list(blocks)
        for i, block in enumerate(blocks):
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_result":
                name, tool_input = calls.get(str(block.get("id")), (str(block.get("name")), {}))
                limits = self.policy.limits(name, tool_input)
                limit = _MASK_BYTES if mask else limits.old if old else limits.recent
                out, view = await self._output(
                    block.get("output"), limit, name, old or everything, short=short
                )
                kept[i], shown[i] = {**block, "output": out}, {**block, "output": view}
                if self.describe is not None and out != block.get("output"):
                    saved = set(notice_paths(out)) - set(notice_paths(block.get("output")))
                    if saved:
                        await self.describe(sorted(saved), name, key_args(tool_input))
            elif kind == "tool_use":
                arguments = block.get("input")
                if isinstance(arguments, dict):
                    limits = self.policy.limits(str(block.get("name", "")), arguments)
                    limit = _MASK_BYTES if mask else limits.old if old else limits.recent
                    args, view_args = await self._arguments(arguments, limit)
                    kept[i], shown[i] = _with_input(block, args), _with_input(block, view_args)
            elif everything and kind == "text":
                limit = _MASK_BYTES if mask else self.policy.standard.old
                text, view = await self.text(block.get("text", ""), limit, short=short)
                kept[i], shown[i] = {**block, "text": text}, {**block, "text": view}
            elif everything and kind in MEDIA_KINDS:
                kept[i], shown[i] = await self._mask(block)
        if shown == blocks:
            return Cut()
        return Cut(content=None if kept == blocks else kept, view=None if shown == kept else shown)

    async def _output(
        self, output: Any, limit: int, tool: str, old: bool, *, short: bool = False
    ) -> tuple[Any, Any]:
        fresh = not old
        if isinstance(output, str):
            if fresh:
                limit = await self.fresh_limit(clean_text(output), limit)
            return await self.text(output, limit, tool=tool, shown=old, short=short)
        if not isinstance(output, list):
            return output, output
        texts = [i for i, b in enumerate(output) if isinstance(b, dict) and b.get("type") == "text"]
        per_block = limit if limit <= _MASK_BYTES else block_budget(limit, len(texts))
        kept, shown = list(output), list(output)
        for i, block in enumerate(output):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                raw = block.get("text", "")
                own = await self.fresh_limit(clean_text(raw), per_block) if fresh else per_block
                text, view = await self.text(raw, own, tool=tool, shown=old, short=short)
                kept[i], shown[i] = {**block, "text": text}, {**block, "text": view}
            elif block.get("type") in MEDIA_KINDS and (old or _is_data_url(block)):
                kept[i], shown[i] = await self._mask(block)
        return kept, shown

    async def _mask(self, block: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A media block as a text block: its rendering (a short URL stays whole; a
        ``data:`` URL or inline data is saved and reduced to the notice)."""
        rendered = media_text(block)
        if rendered is None:
            return block, block
        limit = _MASK_BYTES if len(rendered) > 1_024 else 1_024
        text, view = await self.text(rendered, limit)
        return {"type": "text", "text": text}, {"type": "text", "text": view}

    async def _arguments(
        self, tool_input: dict[str, Any], limit: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Tool arguments with each long string value cut (the call has already run)."""
        long = [k for k, v in tool_input.items() if isinstance(v, str) and utf8_len(v) > 256]
        per_value = limit if limit <= _MASK_BYTES else block_budget(limit, len(long))
        kept, shown = dict(tool_input), dict(tool_input)
        for key in long:
            kept[key], shown[key] = await self.text(tool_input[key], per_value)
        return kept, shown


def _with_input(block: dict[str, Any], tool_input: dict[str, Any]) -> dict[str, Any]:
    """`block` with new arguments; `raw_input` (the model's own text, never sent) follows."""
    if tool_input == block.get("input"):
        return block
    new = {**block, "input": tool_input}
    if "raw_input" in new:
        new["raw_input"] = json.dumps(tool_input, ensure_ascii=False)
    return new
