"""Reading a YAML config file into a mapping, within fixed bounds.

A config is a few dozen values, but YAML can make a 400-byte file expand into millions of
nodes (anchors and aliases, "billion laughs") or nest thousands of levels deep (a
`RecursionError` in the loader). So the file is read only up to `MAX_CONFIG_BYTES`, and its
event stream (parsed without building anything) is checked first: at most `MAX_CONFIG_NODES`
nodes once every alias is expanded, at most `MAX_CONFIG_DEPTH` levels of nesting, no alias
inside its own anchor. Only then is it loaded (`yaml.safe_load` semantics, with libyaml when
installed). Every failure is a `ConfigError` with a short message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import yaml

from .._errors import ConfigError, _short_repr

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "MAX_CONFIG_NODES", "read_config_mapping"]

MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read, in bytes (1 MiB)."""

MAX_CONFIG_NODES = 10_000
"""Most YAML nodes (scalars, lists, mappings; keys count) in a config, aliases expanded."""

MAX_CONFIG_DEPTH = 32
"""Deepest nesting of lists and mappings in a config (aliases expanded)."""

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_config_mapping(path: str | Path) -> dict[str, object]:
    """Read a YAML config file holding a mapping of fields. An empty file gives ``{}``.

    Raises:
        ConfigError: the file is missing, unreadable, too large, not YAML, too big or too
            deep once aliases are expanded, not a mapping, or has a key that is not a string.
    """
    where = _short_repr(str(path))
    try:
        with Path(path).expanduser().open("rb") as file:
            raw = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"config file {where} does not exist") from None
    except (OSError, ValueError, RuntimeError) as exc:  # ValueError: NUL; RuntimeError: '~x'
        raise ConfigError(f"config file {where} cannot be read: {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {where} is too large: got more than {MAX_CONFIG_BYTES} bytes; "
            f"expected at most {MAX_CONFIG_BYTES}"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {where} cannot be read: {exc}") from None
    try:
        _check_shape(text, where)
        data = yaml.load(text, Loader=_LOADER)  # a safe loader (CSafeLoader or SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {where} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {where} must hold a mapping of fields; got {type(data).__name__}"
        )
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(
                f"invalid config field {_short_repr(str(key))}: got key {_short_repr(key)} "
                f"({type(key).__name__}); expected a field name (a string)",
                field=str(key),
            )
    return data


@dataclass
class _Open:
    """A list or mapping whose end event has not come yet."""

    label: str | None
    """Its place under its parent: a key, or a list index; `None` for the document root."""

    anchor: str | None
    is_mapping: bool
    nodes: int = 1
    """Nodes in it so far, itself included, aliases expanded."""

    height: int = 1
    """Levels of nesting in it so far, itself included."""

    children: int = 0
    key: str = "?"
    """The last key seen in a mapping (``"?"`` when that key is not a scalar)."""


def _check_shape(text: str, where: str) -> None:
    """Raise `ConfigError` when `text`, aliases expanded, is too big or too deep."""
    stack: list[_Open] = []
    done: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its finished node
    total = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionEndEvent):
            node = stack.pop()
            if node.anchor is not None:
                done[node.anchor] = (node.nodes, node.height)
            if stack:
                stack[-1].nodes += node.nodes
                stack[-1].height = max(stack[-1].height, node.height + 1)
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document boundaries
        label = _place(stack, event)
        nodes, height = 1, 1
        if isinstance(event, yaml.AliasEvent):
            if any(node.anchor == event.anchor for node in stack):
                _refuse(stack, label, f"alias *{event.anchor} inside its own anchor", "none")
            nodes, height = done.get(str(event.anchor), (1, 1))
        total += nodes
        if total > MAX_CONFIG_NODES:
            _refuse(
                stack,
                label,
                f"more than {MAX_CONFIG_NODES} YAML nodes in config file {where} "
                "(aliases expanded)",
                f"at most {MAX_CONFIG_NODES}",
            )
        if len(stack) + height > MAX_CONFIG_DEPTH:
            _refuse(
                stack,
                label,
                f"lists or mappings nested more than {MAX_CONFIG_DEPTH} levels deep "
                "(aliases expanded)",
                f"at most {MAX_CONFIG_DEPTH}",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(label, event.anchor, isinstance(event, yaml.MappingStartEvent)))
            continue
        if isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
            done[event.anchor] = (1, 1)
        if stack:
            stack[-1].nodes += nodes
            stack[-1].height = max(stack[-1].height, height + 1)


def _place(stack: list[_Open], event: yaml.NodeEvent) -> str | None:
    """The label of the node `event` starts under the innermost open collection."""
    if not stack:
        return None
    parent = stack[-1]
    index = parent.children
    parent.children += 1
    if not parent.is_mapping:
        return str(index)
    if index % 2 == 0:  # a key: it names the value that follows
        parent.key = str(event.value) if isinstance(event, yaml.ScalarEvent) else "?"
    return parent.key


def _refuse(stack: list[_Open], label: str | None, got: str, expected: str) -> NoReturn:
    parts = [node.label for node in stack if node.label is not None]
    if label is not None:
        parts.append(label)
    field = ".".join(parts) or None
    name = _short_repr(field) if field else "<config>"
    raise ConfigError(f"invalid config field {name}: got {got}; expected {expected}", field=field)
