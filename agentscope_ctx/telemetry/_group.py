"""Which session and end user a span belongs to, so that a backend shows one session's runs
together (Langfuse and Arize Phoenix group by ``session.id`` and ``user.id``; the GenAI
semantic conventions name a conversation ``gen_ai.conversation.id``).

The adapters know the tenant (`recall.session`, `recall.user`); the spans are opened deep
below them (a pipeline run, the Compactor's call inside it, a provider's usage, a Summarizer
run in the background). So the attributes travel in a context variable: `grouped` sets them
around a piece of work, and every span this package opens (`_spans`, `_usage`) adds them.
A task started inside `grouped` keeps them (asyncio copies the context). Only the tenant's
names go in: never a key, a connection string or a message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

__all__ = [
    "CONVERSATION_ID",
    "SESSION_ID",
    "USER_ID",
    "current_group",
    "group_attributes",
    "grouped",
]

SESSION_ID = "session.id"
"""The session (Langfuse's and OpenInference's attribute name)."""
USER_ID = "user.id"
"""The end user (OpenTelemetry's general attribute, read by Langfuse and Phoenix)."""
CONVERSATION_ID = "gen_ai.conversation.id"
"""The session, as the GenAI semantic conventions name a conversation."""

_NONE: Mapping[str, str] = MappingProxyType({})
_group: ContextVar[Mapping[str, str]] = ContextVar("agentscope_ctx_span_group", default=_NONE)


def group_attributes(session: str | None, user: str | None) -> Mapping[str, str]:
    """The grouping attributes of a tenant: ``session.id`` and ``gen_ai.conversation.id``
    for `session`, ``user.id`` for `user`; a part that is `None` or empty is left out."""
    attributes: dict[str, str] = {}
    if session:
        attributes[SESSION_ID] = session
        attributes[CONVERSATION_ID] = session
    if user:
        attributes[USER_ID] = user
    return MappingProxyType(attributes)


@contextmanager
def grouped(attributes: Mapping[str, str]) -> Iterator[None]:
    """Every span this package opens inside carries `attributes` (see the module docstring).
    Costs one context-variable set and reset, tracing on or off."""
    token = _group.set(attributes)
    try:
        yield
    finally:
        _group.reset(token)


def current_group() -> Mapping[str, str]:
    """The grouping attributes in effect (empty outside `grouped`)."""
    return _group.get()
