"""`agentscope-ctx search`: the hits an agent's `search_history` gives, for a person (each
with the `agentscope-ctx read` command that reads on) or, with ``--json``, for a script (its
shape: `docs/cli.md`, `SEARCH_VERSION`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import ContextError
from ..core.truncation._truncation import Position
from ._common import (
    DEFAULT_WORKING_DIR,
    CliError,
    UsageError,
    _fleet,
    _load_config,
    _looks_like_path,
    _state_dir,
    cli_tenant,
)
from ._read import read_command

if TYPE_CHECKING:
    from ..core.search._search_hits import Filters, Hit, SearchResult

__all__ = ["SEARCH_VERSION"]

SEARCH_VERSION = 1
"""The ``version`` of `search --json`'s object; raised when a field changes meaning or goes."""


def _split(words: list[str]) -> tuple[str | None, str]:
    """WORKING_DIR (when the first word names one) and the query."""
    where = None
    first = Path(words[0]).expanduser()
    if len(words) > 1 and (first.exists() or _looks_like_path(words[0])):
        where = words.pop(0)  # a missing one is reported by `_state_dir`
    elif len(words) == 1 and first.is_dir():
        raise UsageError(
            f"QUERY is missing after WORKING_DIR {words[0]!r} (to search for that word, give "
            f"the working dir first: search {DEFAULT_WORKING_DIR} {words[0]})"
        )
    return where, " ".join(words)


def _filters(args: argparse.Namespace) -> Filters:
    from ..core.search._search_hits import MAX_HITS, ROLES, Filters, parse_time

    if args.role is not None and args.role not in ROLES:
        raise UsageError(f"--role must be one of {', '.join(ROLES)}; got {args.role!r}")
    if args.limit is not None and not 1 <= args.limit <= MAX_HITS:
        raise UsageError(f"--limit must be from 1 to {MAX_HITS}; got {args.limit}")
    tenant = cli_tenant(args)
    try:
        return Filters(
            tenant=tenant,
            session=args.session if tenant is None else None,
            role=args.role,
            tool=args.tool,
            since=parse_time(args.since, "--since"),
            until=parse_time(args.until, "--until"),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _owner(filters: Filters) -> tuple[str | None, str | None]:
    """The agent key and session searched (`None`: any)."""
    tenant = filters.tenant
    if tenant is None:
        return None, filters.session
    return tenant.agent, tenant.session if tenant.scope == "session" else None


def scope_of(filters: Filters) -> str:
    """Whose history was searched, in words."""
    agent, session = _owner(filters)
    who = "all agents' history" if agent is None else f"the history of agent {agent!r}"
    return who + (f", session {session!r}" if session is not None else "")


def _hit_json(hit: Hit, read: str) -> dict[str, Any]:
    return {
        "kind": hit.kind,
        "ref": str(hit.path),
        "start_line": hit.start_line,
        "line_offset": hit.line_offset,
        "lines": [{"line": number, "text": text} for number, text in hit.lines],
        "role": hit.role,
        "tool": hit.tool,
        "args": hit.args,
        "agent": hit.agent,
        "time": hit.ts,
        "score": hit.score,
        "read": read,
    }


def _as_json(
    result: SearchResult, query: str, filters: Filters, searched: str, read: Any
) -> dict[str, Any]:
    return {
        "version": SEARCH_VERSION,
        "query": query,
        "searched": searched,
        "scope": dict(zip(("agent", "session"), _owner(filters), strict=True)),
        "complete": result.searched and not result.pending and not result.busy,
        "every_word": result.every,
        "pending_files": result.pending,
        "hits": [_hit_json(hit, read(hit)) for hit in result.hits],
    }


def _cmd_search(args: argparse.Namespace) -> int:
    from ..core.search._search_hits import DEFAULT_HITS, format_result
    from ..core.search._search_text import parse_query
    from ..stores._search import SearchIndex

    where, query = _split(list(args.words))
    if not query.strip():
        raise UsageError("QUERY is empty")
    if not parse_query(query).terms:
        raise UsageError(f"QUERY {query!r} has no words to search for")
    filters = _filters(args)
    config = _load_config(args.config)
    backend = _fleet(config)
    path = _state_dir(where, config) if backend is None else Path()
    index = SearchIndex(path) if backend is None else backend.search
    searched = f"{path.resolve()}: {index.sources}" if backend is None else str(index.sources)
    try:
        result = index.search(
            query, filters, limit=args.limit or DEFAULT_HITS, catch_up_seconds=None
        )
    except ContextError as exc:
        raise CliError(str(exc)) from None

    def read(hit: Hit) -> str:
        at = Position(hit.start_line, hit.line_offset)
        return read_command(str(hit.path), at, args.config)

    if args.json:
        facts = _as_json(result, query, filters, searched, read)
        print(json.dumps(facts, ensure_ascii=False, indent=2))
        return 0
    text = format_result(
        result,
        query,
        shared=filters.tenant is None,
        max_bytes=1 << 20,
        sources=searched,
        scope=scope_of(filters),
        read_on=read,
    )
    print(text)
    return 0
