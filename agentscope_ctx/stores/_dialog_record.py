"""The dialog record: how one message is written to a ``dialog/YYYY-MM-DD.jsonl`` line.

This module is the only place the format is defined. The record, version 1::

    {"v": 1, "msg": <Msg.to_dict()>}
    {"v": 1, "msg": <Msg.to_dict()>, "agent": "<name>", "session": "<id>"}
    {"v": 1, "msg": <Msg.to_dict(), made storable>, "lossy": ["metadata.when", "content"]}

``agent`` and ``session`` are optional (absent in older records, which belong to nobody): the
owner of the record (`core._tenant`: the agent key, ``user/agent`` when the user is known, and
the session, ``""`` for none). They scope `search_history` and `read_file`, and a message id
is stored once per owner.

``msg`` holds ``id``, ``name``, ``role``, ``content`` (a string or a list of content blocks),
``metadata`` and ``timestamp`` exactly as ``Msg.to_dict()`` gives them; ``Msg.from_dict()``
reads it back. Text is written unescaped (``ensure_ascii=False``); a record whose text cannot be
encoded as UTF-8 (it holds surrogate code points) is written with ``\\uXXXX`` escapes instead.
JSON reads a high surrogate's escape followed by a low one's as one character (the pair
``"\\ud800\\udc00"`` as U+10000), so such a record carries ``split`` (an optional field of
version 1): the ordinals of the characters above U+FFFF that were two code points, counted
from 0 over every string of ``msg`` (keys and values) in document order; reading splits them
again, so every string, lone surrogates and pairs of them included, round-trips exactly. A
reader that does not know the field (an older one, the search index's catch-up) reads each
such pair as its one character, as before; a record without it is read as before.

A message is stored even when it is odd, so that one message never stops the store:

- a value JSON cannot hold (a ``datetime``, a ``set``, ``bytes``, any object; a circular
  reference) is written as a string: ``str(value)`` (``repr`` if that fails,
  ``"<circular reference>"`` for a cycle, ``"<TYPE nested too deep>"`` below 100 levels), and so
  is a dict key that is not a string (``1``, ``None``, a tuple), which JSON could not give back;
  a tuple is written as a list, as JSON does, and not flagged;
- a ``content`` that ``Msg.from_dict`` would refuse is made readable: ``None`` becomes ``[]``
  (AgentScope reads both as "no blocks"), a single block (a dict) becomes a one-block list, and
  anything else its string.

Such a record carries ``lossy``: the paths of the values that were changed (``"metadata.when"``,
``"content[0].input.since"``, ``"metadata.tags"``), in document order. It is an optional field
of version 1: a record without it was stored exactly, and readers that do not know it ignore
it. A record is never refused for its values; only a message whose ``id`` is not a string is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import date

from ..core._entry import Msg
from ..core._errors import PersistenceError

__all__ = ["RECORD_VERSION", "date_prefix", "decode_owned", "decode_record", "encode_record"]

RECORD_VERSION = 1
"""The ``v`` field of the records this module writes (and the only one it reads)."""

_MAX_DEPTH = 100
_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[ T]|$)")
_SCALARS = (str, int, float, bool, type(None))
_ASTRAL_OR_PAIR = re.compile("[\U00010000-\U0010ffff]|[\ud800-\udbff][\udc00-\udfff]")
"""What JSON reads back as one character above U+FFFF: that character, or a surrogate pair."""


def date_prefix(text: object) -> str | None:
    """The valid ``YYYY-MM-DD`` that `text` starts with (followed by a space, ``T`` or nothing)."""
    match = _DAY.match(text) if isinstance(text, str) else None
    try:
        return date.fromisoformat(match.group(1)).isoformat() if match else None
    except ValueError:
        return None


def encode_record(msg: Msg, fields: Mapping[str, str] | None = None) -> tuple[bytes, list[str]]:
    """One record line (``\\n`` included) and the paths of the values made storable;
    `fields` (``agent``, ``session``) are written after ``msg``.

    Raises:
        PersistenceError: The message's id is not a string (the store goes by id).
    """
    if not isinstance(msg.id, str):
        raise PersistenceError(f"message id must be a str, got {msg.id!r}")
    data = msg.to_dict()
    lossy: list[str] = []
    content = data.get("content")
    if not isinstance(content, (str, list, tuple)):  # what `Msg.from_dict` would refuse
        lossy.append("content")
        if content is None:
            data["content"] = []
        elif isinstance(content, Mapping):
            data["content"] = [content]
        else:
            data["content"] = _text(content)
    stored = _storable(data, "", lossy, (), 0)
    record: dict[str, object] = {"v": RECORD_VERSION, "msg": stored}
    record.update(fields or {})
    if lossy:
        record["lossy"] = lossy
    text = json.dumps(record, ensure_ascii=False)  # cannot fail: `_storable` made it JSON
    try:
        return (text + "\n").encode("utf-8"), lossy
    except UnicodeEncodeError:  # surrogate code points: escaped, pairs of them noted
        split = _pairs_written(stored)
        if split:
            record["split"] = split
        return (json.dumps(record) + "\n").encode("ascii"), lossy


def decode_record(raw: bytes) -> Msg | str:
    """The message of a record line, or why the line is not a valid record."""
    return decode_owned(raw)[0]


def decode_owned(raw: bytes) -> tuple[Msg | str, str, str]:
    """`decode_record`, with the record's owner: its ``agent`` and ``session`` (``""`` when
    absent or not a string)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _decode(raw), "", ""
    if not isinstance(record, dict):
        return _decode(raw), "", ""
    agent, session = record.get("agent"), record.get("session")
    return (
        _decode(raw, record),
        agent if isinstance(agent, str) else "",
        session if isinstance(session, str) else "",
    )


def _decode(raw: bytes, parsed: object = None) -> Msg | str:
    if parsed is not None:
        return _message(parsed, raw)
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not valid UTF-8"
    except json.JSONDecodeError as exc:
        return f"invalid JSON ({exc.msg} at column {exc.colno})"
    return _message(record, raw)


def _message(record: object, raw: bytes) -> Msg | str:
    if not isinstance(record, dict):
        return f"not a record: a JSON {type(record).__name__}"
    if record.get("v") != RECORD_VERSION:
        return f"unsupported record version {record.get('v')!r}"
    data = record.get("msg")
    split = record.get("split")
    if isinstance(split, list) and split:  # read again, keys that JSON made one kept apart
        pairs = json.loads(raw.decode("utf-8"), object_pairs_hook=_Pairs)
        msg = next((value for key, value in pairs if key == "msg"), None)
        data = _split_pairs(msg, {n for n in split if isinstance(n, int)})
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return "record without a message id"
    try:
        return Msg.from_dict(data)
    except Exception as exc:  # any malformed field: the caller reports it, never raises
        return f"not a message ({type(exc).__name__}: {exc})"


def _strings(value: object) -> Iterator[str]:
    """Every string of JSON value `value` (keys and values), in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _pairs_written(value: object) -> list[int]:
    """The ordinals (`split`) of the characters above U+FFFF that JSON will read in `value`'s
    strings, of those that are a high and a low surrogate code point."""
    split: list[int] = []
    n = 0
    for text in _strings(value):
        for match in _ASTRAL_OR_PAIR.finditer(text):
            if len(match.group()) == 2:
                split.append(n)
            n += 1
    return split


class _Pairs(list[tuple[str, object]]):
    """A JSON object as read, its keys in order, none merged (``object_pairs_hook``)."""


def _split_pairs(value: object, split: set[int]) -> object:
    """`value` read from JSON (objects as `_Pairs`) with its `split` characters
    (`_pairs_written`) made two surrogate code points again, and its objects dicts."""
    n = 0

    def text(value: str) -> str:
        nonlocal n
        out: list[str] = []
        for char in value:
            if ord(char) > 0xFFFF:
                if n in split:
                    code = ord(char) - 0x10000
                    char = chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF))
                n += 1
            out.append(char)
        return "".join(out)

    def walk(value: object) -> object:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, _Pairs):
            return {text(key): walk(item) for key, item in value}
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(value)


def _storable(
    value: object, path: str, lossy: list[str], active: tuple[int, ...], depth: int
) -> object:
    """`value` with everything JSON cannot hold rendered as a string (paths noted in `lossy`)."""
    if isinstance(value, _SCALARS):
        return value
    if not isinstance(value, (Mapping, list, tuple)):
        lossy.append(path)
        return _text(value)
    if id(value) in active or depth >= _MAX_DEPTH:
        lossy.append(path)
        return "<circular reference>" if id(value) in active else _deep(value)
    inner = (*active, id(value))
    if isinstance(value, Mapping):
        out: dict[str, object] = {}
        for key, item in value.items():
            name = key if isinstance(key, str) else _text(key)
            where = f"{path}.{name}" if path else name
            if name is not key:
                lossy.append(where)
            out[name] = _storable(item, where, lossy, inner, depth + 1)
        return out
    return [
        _storable(item, f"{path}[{i}]", lossy, inner, depth + 1) for i, item in enumerate(value)
    ]


def _text(value: object) -> str:
    for render in (str, repr):
        try:
            return render(value)
        except Exception:  # a broken __str__ / __repr__: try the next, then give up
            continue
    return f"<unprintable {type(value).__name__}>"


def _deep(value: object) -> str:
    return f"<{type(value).__name__} nested too deep>"
