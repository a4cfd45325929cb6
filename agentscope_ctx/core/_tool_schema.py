"""`plain_optionals`: shorter JSON schemas for the tools this package adds.

Every prompt carries the tools' schemas, so their size is paid at every model call; in a
small window (a model with a `context_size` of a few thousand tokens) it decides how much
room the conversation has. A parameter ``x: str | None = None`` is rendered by pydantic (and
by AgentScope 1.x's toolkit) as ``anyOf: [{type: string}, {type: null}], default: null``;
as the plain type, still not required, a model makes the same calls.
"""

from __future__ import annotations

from typing import Any

__all__ = ["plain_optionals"]


def plain_optionals(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each optional parameter that defaults to `None` (``x: str | None =
    None``, which pydantic renders as ``anyOf: [{type: string}, {type: null}], default:
    null``) as its plain type, still not required: the same calls in fewer tokens
    (`search_history`: 379 -> 299, o200k_base)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    plain = {}
    for name, prop in properties.items():
        options = prop.get("anyOf") if isinstance(prop, dict) else None
        if (
            isinstance(options, list)
            and len(options) == 2
            and {"type": "null"} in options
            and prop.get("default", ...) is None
            and name not in schema.get("required", ())
        ):
            kept = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            prop = {**next(o for o in options if o != {"type": "null"}), **kept}
        plain[name] = prop
    return {**schema, "properties": plain}
