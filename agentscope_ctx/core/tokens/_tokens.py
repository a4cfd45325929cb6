"""Token counting for AgentScope prompts and messages: offline, cached per message (the
encoding: `_encodings.make_encoding`, which never downloads).

Media are not text, so they cost fixed estimates whatever their source: an image 765 tokens
(OpenAI's high-detail price of a 1024x1024 image: 85 + 4 tiles x 170), an audio 1_000 (about
30 s at Gemini's 32 tokens/s), a video 2_630 (10 s at 263 tokens/s).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._entry import Msg
from .._host import host
from ._encodings import Encoder, make_encoding


class _PlainCounterBase:
    """AgentScope 2.x has no token counter classes (models count bytes / 4): a counter
    given to `TokenCounter(counter=...)` there is any object with this method."""

    async def count(self, messages: list[dict[str, Any]], **kwargs: Any) -> int:
        raise NotImplementedError


if TYPE_CHECKING:  # each line's type check sees its own (mypy --always-true/false IS_1X)
    from ..._line import IS_1X

    if IS_1X:
        from agentscope.token import TokenCounterBase
    else:
        TokenCounterBase = _PlainCounterBase
else:  # on 1.x, AgentScope's `TokenCounterBase`, lent by the 1.x adapter (`_host`)
    TokenCounterBase = host().token_counter_base or _PlainCounterBase


__all__ = ["TokenCounter", "make_encoding"]

logger = logging.getLogger("agentscope_ctx")

_MEDIA = {"image": 765, "audio": 1_000, "video": 2_630}
_FORMATTED_MEDIA = {**_MEDIA, "image_url": 765, "input_audio": 1_000}  # parts of a prompt
_MSG_OVERHEAD = 4  # per message, as in OpenAI's cookbook
_REPLY_PRIMING = 3  # per prompt: <|start|>assistant<|message|>
_CHUNK_CHARS = 1_000_000  # larger texts are encoded in pieces cut after a newline
# Larger texts are encoded off the event loop (~25 ms of work), though tiktoken runs about
# 35% slower in a worker thread than in the main one.
_THREAD_CHARS = 256_000
_CACHE_SIZE = 100_000
_TEXT_CACHE_CHARS = 4_000_000
"""Characters of the texts whose counts `count_text` remembers (least recently used out):
a formatted prompt repeats the last one's messages, so `count` of it encodes only what is
new."""
_TEXT_CACHE_MIN = 64  # shorter texts are encoded faster than looked up


class TokenCounter(TokenCounterBase):
    """Counts tokens of formatted prompts (AgentScope's API) and of `Msg` objects.

    `count_msg` remembers each message's count under its id and a fingerprint made of the
    `hash()` of its strings (which CPython caches): an unchanged history is re-counted at about
    a microsecond per message, and a changed message is counted again. `count_text` (so
    `count` of a formatted prompt) remembers the counts of the texts of its last few
    million characters: a prompt's texts that the previous prompt held are not encoded again.
    """

    def __init__(
        self, encoding: str = "o200k_base", *, counter: TokenCounterBase | None = None
    ) -> None:
        """Initialize the counter.

        Args:
            encoding: The tiktoken encoding to use if available offline (see `make_encoding`).
            counter: Any AgentScope token counter; when given, it counts everything instead.
        """
        self._counter = counter
        self._encoder: Encoder | None = None
        if counter is not None:
            self._backend = f"custom:{type(counter).__name__}"
        else:
            self._encoder, self._backend = make_encoding(encoding)
        self._cache: OrderedDict[str, tuple[tuple[object, ...], int]] = OrderedDict()
        self._cache_size = _CACHE_SIZE
        self._hits = self._misses = 0
        self._texts: OrderedDict[str, int] = OrderedDict()
        self._texts_chars = 0
        self._texts_lock = threading.Lock()  # a counter may serve several threads' loops

    @property
    def backend(self) -> str:
        """``"tiktoken:<encoding>"``, ``"bytes"`` or ``"custom:<ClassName>"``."""
        return self._backend

    def cache_info(self) -> tuple[int, int]:
        """The message cache's (hits, misses) so far."""
        return self._hits, self._misses

    async def count(
        self,
        messages: Sequence[Mapping[str, object]],
        tools: Sequence[Mapping[str, object]] | None = None,
        **kwargs: object,
    ) -> int:
        """Count a formatted prompt: every string in the messages, plus the tool schemas.

        Base64 data and media parts cost the fixed estimates. Adds 4 tokens per message and 3
        for the reply priming, as OpenAI's cookbook does.

        Args:
            messages: Formatted messages (OpenAI- or Anthropic-style dicts).
            tools: The tool JSON schemas sent with the prompt.
            **kwargs: Passed on to the foreign counter, if any.

        Returns:
            The number of tokens.
        """
        if self._counter is not None:
            extra = {"tools": [dict(tool) for tool in tools]} if tools else {}
            copies = [dict(message) for message in messages]  # some counters mutate their input
            return int(await self._counter.count(copies, **extra, **kwargs))
        texts: list[str] = []
        total = _REPLY_PRIMING + _MSG_OVERHEAD * len(messages) + _collect(messages, texts)
        for text in texts:
            total += await self.count_text(text)
        return total + await self.count_tools(tools or [])

    async def count_text(self, text: str) -> int:
        """Count the tokens of `text`; special-token strings like ``<|endoftext|>`` are text."""
        if self._counter is not None:
            return int(await self._counter.count([{"role": "user", "content": text}]))
        if self._encoder is None:
            n_bytes = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            return -(-n_bytes // 3)
        if len(text) < _TEXT_CACHE_MIN:
            return len(self._encoder.encode_ordinary(text))
        with self._texts_lock:
            known = self._texts.get(text)
            if known is not None:
                self._texts.move_to_end(text)
                return known
        if len(text) > _THREAD_CHARS:
            tokens = await asyncio.to_thread(_encode_len, self._encoder, text)
        else:
            tokens = len(self._encoder.encode_ordinary(text))
        self._remember(text, tokens)
        return tokens

    def _remember(self, text: str, tokens: int) -> None:
        """Keep `text`'s count (unless it would take over a quarter of the cache)."""
        if len(text) > _TEXT_CACHE_CHARS // 4:
            return
        with self._texts_lock:
            if text in self._texts:
                return
            self._texts[text] = tokens
            self._texts_chars += len(text)
            while self._texts_chars > _TEXT_CACHE_CHARS:
                old, _ = self._texts.popitem(last=False)
                self._texts_chars -= len(old)

    async def count_tools(self, schemas: Sequence[Mapping[str, object]]) -> int:
        """Count tool JSON schemas, each as its `json.dumps`."""
        texts = [_dumps(schema) for schema in schemas]
        if self._counter is not None and texts:
            return await self.count_text("\n".join(texts))
        return sum([await self.count_text(text) for text in texts])

    async def count_msg(self, msg: Msg) -> int:
        """Count one message block by block, or take its count from the cache if unchanged.

        With tiktoken or bytes, it is at least `count()` of the message formatted alone by
        `OpenAIChatFormatter` (reply priming included), so a budget check on messages is safe.

        Args:
            msg: The message.

        Returns:
            The number of tokens.
        """
        return await self.count_msgs([msg])

    async def count_msgs(self, msgs: Sequence[Msg]) -> int:
        """Sum `count_msg` over `msgs`."""
        total, cache = 0, self._cache
        for msg in msgs:
            key, fingerprint = msg.id, _fingerprint(msg)
            entry = cache.get(key)
            if entry is not None and entry[0] == fingerprint:
                cache.move_to_end(key)
                self._hits += 1
                total += entry[1]
                continue
            self._misses += 1
            cache[key] = (fingerprint, await self._count_uncached(msg))
            cache.move_to_end(key)
            while len(cache) > self._cache_size:
                cache.popitem(last=False)
            total += cache[key][1]
        return total

    async def _count_uncached(self, msg: Msg) -> int:
        """Count `msg` from scratch."""
        meta, body, fixed = _render(msg)
        if self._counter is not None:
            message = {"role": str(msg.role), "content": "\n".join(body)}
            return fixed + int(await self._counter.count([message]))
        total = fixed + _MSG_OVERHEAD + _REPLY_PRIMING
        for text in meta + body:
            total += await self.count_text(text) if text else 0
        return total


def _encode_len(encoder: Encoder, text: str) -> int:
    """Tokens of `text`, encoded in pieces of up to 1M characters cut after a newline.

    Bounds the memory of the token ids; a cut can shift the count by a token or so.
    """
    total, start = 0, 0
    while start < len(text):
        end = start + _CHUNK_CHARS
        if end < len(text) and (cut := text.rfind("\n", start, end)) > start:
            end = cut + 1
        total += len(encoder.encode_ordinary(text[start:end]))
        start = end
    return total


def _dumps(value: object) -> str:
    """`json.dumps` as AgentScope's formatters call it; `repr` for what JSON cannot hold."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _fingerprint(msg: Msg) -> tuple[object, ...]:
    """A cheap comparable digest of what `count_msg` counts; flat, as it is the warm hot path."""
    content = msg.content
    if type(content) is str:
        return (msg.role, msg.name, hash(content))
    if not isinstance(content, (list, tuple)):
        return (msg.role, msg.name, _digest(content))
    digest: list[object] = [msg.role, msg.name]
    for block in content:
        if type(block) is dict:
            digest.append(None)  # block boundary
            for key, value in block.items():
                digest.append(key)
                digest.append(hash(value) if type(value) is str else _digest(value))
        else:
            digest.append(_digest(block))
    return tuple(digest)


def _digest(value: object) -> object:
    """`_fingerprint` of a nested value: strings by `hash()`, containers item by item."""
    if isinstance(value, str):
        return hash(value)
    if isinstance(value, Mapping):
        return (*value, *[_digest(item) for item in value.values()])
    if isinstance(value, (list, tuple)):
        return tuple([_digest(item) for item in value])
    try:
        return hash(value)
    except TypeError:
        return hash(repr(value))


def _collect(value: object, texts: list[str]) -> int:
    """Append the strings of a formatted prompt part to `texts`; return its media estimate."""
    if isinstance(value, str):
        if value.startswith("data:") and ";base64," in value[:200]:
            return _MEDIA.get(value[5:10], 765)  # "image", "audio", "video"
        texts.append(value)
        return 0
    if isinstance(value, Mapping):
        kind = value.get("type")
        if isinstance(kind, str) and kind in _FORMATTED_MEDIA:
            return _FORMATTED_MEDIA[kind]
        if kind == "base64":
            return _MEDIA.get(str(value.get("media_type", ""))[:5], 765)
        media = 0
        for key, item in value.items():
            if key == "input" and isinstance(item, Mapping):  # Anthropic tool_use arguments
                texts.append(_dumps(item))
            else:
                media += _collect(item, texts)
        return media
    if isinstance(value, (list, tuple)):
        return sum(_collect(item, texts) for item in value)
    if value is not None and not isinstance(value, bool):
        texts.append(str(value))
    return 0


def _render(msg: Msg) -> tuple[list[str], list[str], int]:
    """The strings `OpenAIChatFormatter` would send for `msg`, and its fixed costs.

    Returns (meta, body, fixed): the structural strings (role, name, type tags, call ids), the
    content proper, and the media estimates plus the overhead of each tool result (a "tool"
    message of its own). Thinking blocks, which that formatter drops, are counted.
    """
    meta, body, fixed = [str(msg.role), str(msg.name)], list[str](), 0
    blocks = (
        [{"type": "text", "text": msg.content}] if isinstance(msg.content, str) else msg.content
    )
    for block in blocks if isinstance(blocks, (list, tuple)) else [blocks]:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping) or not isinstance(kind, str):
            body.append(_dumps(block))
        elif kind == "text":
            meta.append("text")
            body.append(str(block.get("text", "")))
        elif kind == "thinking":
            body.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            meta += [str(block.get("id", "")), "function"]
            body += [str(block.get("name", "")), _dumps(block.get("input", {}))]
        elif kind == "tool_result":
            output, media = _render_output(block.get("output"))
            meta += ["tool", str(block.get("id", "")), str(block.get("name", ""))]
            body.append(output)
            fixed += media + _MSG_OVERHEAD
        elif kind in _MEDIA:
            fixed += _MEDIA[kind]
        else:
            body.append(_dumps(block))
    return meta, body, fixed


def _render_output(output: object) -> tuple[str, int]:
    """A tool output as `FormatterBase.convert_tool_result_to_string` renders it, and its media."""
    if output is None or isinstance(output, str):
        return output or "", 0
    if not isinstance(output, list):
        return _dumps(output), 0
    lines, media = list[str](), 0
    for item in output:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if isinstance(item, Mapping) and kind == "text":
            lines.append(str(item.get("text", "")))
        elif isinstance(item, Mapping) and isinstance(kind, str) and kind in _MEDIA:
            source = item.get("source")
            url = source.get("url") if isinstance(source, Mapping) else None
            lines.append(f"The returned {kind} can be found at: {url or '<saved file>'}")
            media += _MEDIA[kind]
        else:
            lines.append(_dumps(item))
    return (lines[0] if len(lines) == 1 else "\n".join("- " + line for line in lines)), media
