"""The commands of `agentscope-ctx` (`demo`, `inspect`, `config`, `gc`, `consolidate`,
`search`), one function each, taking the parsed arguments and returning the exit code."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import ContextError

if TYPE_CHECKING:
    from ..core._config import ContextConfig
    from ..stores._dialog import DialogReadReport
from ._common import (
    DEFAULT_WORKING_DIR,
    CliError,
    UsageError,
    _age,
    _load_config,
    _looks_like_path,
    _new_demo_dir,
    _size,
    _state_dir,
    _tool_result_files,
)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import DEMOS, run_demo

    if args.name not in DEMOS:
        names = ", ".join(DEMOS)
        raise CliError(f"unknown demo {args.name!r}; expected one of: {names}", code=2)
    config = _load_config(args.config)
    models = None
    if args.model_config:
        from .._providers import load_models

        models = load_models(args.model_config)
        if models is None:
            raise CliError(f"{args.model_config!r} has no model: section", code=2)
    working_dir = _demo_working_dir(args.working_dir, config)
    if working_dir.exists() and not working_dir.is_dir():
        raise CliError(f"working dir {str(working_dir)!r} is not a directory")
    report = asyncio.run(run_demo(args.name, working_dir, config=config, models=models))
    print(f"\nInspect it with: agentscope-ctx inspect {report.working_dir}")
    if report.peak > report.budget:
        raise CliError(f"peak prompt {report.peak} tokens exceeded the budget {report.budget}")
    return 0


def _demo_working_dir(arg: str | None, config: ContextConfig | None) -> Path:
    """Where a demo runs: `--working-dir` as given; else, when the config sets `working_dir`,
    a fresh run dir inside it (the demo's made-up logs and history never mix with the
    dialog/ and tool_result/ of a working dir in use); else a fresh one here."""
    configured = config is not None and "working_dir" in config.model_fields_set
    if arg:
        if configured:
            assert config is not None
            print(f"(--working-dir is used, not the config's working_dir {config.working_dir})")
        return Path(arg).expanduser()
    if configured:
        assert config is not None
        parent = Path(config.working_dir).expanduser()
        if parent.exists() and not parent.is_dir():
            raise CliError(f"the config's working_dir {str(parent)!r} is not a directory")
        path = _new_demo_dir(parent)
        print(f"(the run goes to {path}, a fresh run dir inside the config's working_dir)")
        return path
    return _new_demo_dir()


def _fleet(config: ContextConfig | None) -> Any:
    """The fleet store's seams when the config names one (``store.kind: postgres``), else
    `None` (the working dir's files)."""
    if config is None or config.store.kind != "postgres":
        return None
    from ..stores.factory import open_backend

    return open_backend(config)


def _inspect_files(path: Path) -> DialogReadReport:
    """What the working dir's dialog/ and tool_result/ hold."""
    from ..stores._dialog import DialogStore

    try:
        store = DialogStore(path)
        msgs, report = store.read()
    except ContextError as exc:
        raise CliError(f"working dir {str(path)!r} is corrupt: {exc}") from None
    days: dict[str, int] = {}
    for name in report.files:
        days[name.removesuffix(".jsonl")] = 0
    for msg in msgs:
        day = str(msg.timestamp or "")[:10]
        days[day] = days.get(day, 0) + 1
    print(f"dialog/: {report.messages} messages in {len(report.files)} day file(s)")
    for day, count in sorted(days.items()):
        print(f"  {day}: {count} messages")
    files = _tool_result_files(path)
    now = time.time()
    total = sum(p.stat().st_size for p in files)
    print(f"tool_result/: {len(files)} file(s), {_size(total)}")
    if files:
        ages = [now - p.stat().st_mtime for p in files]
        print(f"  newest {_age(min(ages))} old, oldest {_age(max(ages))} old")
    return report


def _inspect_fleet(backend: Any, config: ContextConfig) -> None:
    """What the fleet store holds (the database: its dialog days and saved outputs)."""
    dialog, outputs = backend.dialog(), backend.outputs()
    try:
        days = dialog.day_counts()
        count, total, newest, oldest = outputs.stats()
    except ContextError as exc:
        raise CliError(str(exc)) from None
    print(f"store: PostgreSQL {backend.search.engine.dsn} schema {config.store.schema_name}")
    print(f"dialog: {sum(days.values())} messages over {len(days)} day(s) (pg-dialog:DAY)")
    for day, n in days.items():
        print(f"  {day}: {n} messages")
    print(f"saved outputs: {count}, {_size(total)} (pg-output:ID)")
    if newest is not None and oldest is not None:
        now = time.time()
        print(f"  last used {_age(now - newest)} ago (newest), {_age(now - oldest)} ago (oldest)")


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ..stores._usage_file import read_usage

    config = _load_config(args.config)
    backend = _fleet(config)
    report = None
    if backend is not None:
        assert config is not None
        _inspect_fleet(backend, config)
        path = Path(args.working_dir or config.working_dir).expanduser()
        print(f"working dir (memory, usage): {path.resolve()}")
    else:
        path = _state_dir(args.working_dir, config, demo_fallback=True)
        print(f"working dir: {path.resolve()}")
        report = _inspect_files(path)
    memory_dir = path / "memory"
    notes = sorted(memory_dir.glob("*.md")) if memory_dir.is_dir() else []
    print(f"memory/: {len(notes)} file(s)")
    for note in notes:
        print(f"  {note.name}: {_size(note.stat().st_size)}")
    for usage in read_usage(path):
        cache = usage.get("cache_reuse")
        provider = usage.get("provider_prompt_tokens")
        counter = usage.get("counter")
        how = f"{counter}, " if isinstance(counter, str) else ""
        print(
            f"agent {usage.get('agent')!s}: context {usage.get('prompt_tokens', 0):,} of "
            f"{usage.get('max_input_tokens', 0):,} tokens by the context manager's estimate "
            f"({how}messages before formatting, after its last reply)"
            + (
                f"; last prompt sent {provider:,} tokens by the provider's count"
                if isinstance(provider, int)
                else ""
            )
            + (
                f"; {cache:.0%} of the provider's prompt tokens read from its cache"
                if isinstance(cache, float)
                else "; no cache reads reported"
            )
            + f" (as of {usage.get('updated')})"
        )
    if report is not None and report.bad_lines:
        name, line, reason = report.bad_lines[0]
        raise CliError(
            f"dialog/ is corrupt: {len(report.bad_lines)} unreadable line(s), first "
            f"{name}:{line}: {reason}"
        )
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    print(
        Path(__file__).parent.parent.joinpath("core", "default.yaml").read_text(encoding="utf-8"),
        end="",
    )
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from ..stores._tool_results import ToolResultStore

    config = _load_config(args.config)
    days = args.retention_days
    if days is None:
        days = config.tool_result.retention_days if config else 7.0
    if days <= 0:
        raise CliError(f"--retention-days must be > 0, got {days!r}", code=2)
    if config is not None and config.store.kind == "postgres":  # its outputs unused > days
        retention = config.tool_result.model_copy(update={"retention_days": days})
        backend = _fleet(config.model_copy(update={"tool_result": retention}))
        outputs = backend.outputs()
        try:
            _, size_before, _, _ = outputs.stats()
            gone = outputs.cleanup([])
            backend.search.drop_outputs(gone)
            left, size_left, _, _ = outputs.stats()
        except ContextError as exc:
            raise CliError(str(exc)) from None
        print(
            f"gc: removed {len(gone)} saved output(s) unused for over {days:g} days "
            f"({_size(max(size_before - size_left, 0))}); {left} kept"
        )
        return 0
    path = _state_dir(args.working_dir, config)
    store = ToolResultStore(path, days)
    sizes = {p.resolve(): p.stat().st_size for p in _tool_result_files(path)}
    removed = store.cleanup(referenced=[])
    freed = sum(sizes.get(p.resolve(), 0) for p in removed)
    left = len(_tool_result_files(path))
    print(
        f"gc: removed {len(removed)} tool_result file(s) older than {days:g} days "
        f"({_size(freed)}); {left} kept"
    )
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from ..core._search_hits import DEFAULT_HITS, MAX_HITS, ROLES, format_result, parse_time
    from ..core._search_text import parse_query
    from ..stores._search import Filters, SearchIndex

    words = list(args.words)
    where = None
    first = Path(words[0]).expanduser()
    if len(words) > 1 and (first.exists() or _looks_like_path(words[0])):
        where = words.pop(0)  # a missing one is reported by `_state_dir`
        if first.exists() and not first.is_dir():
            raise UsageError(f"WORKING_DIR {where!r} is not a directory")
    elif len(words) == 1 and first.is_dir():
        raise UsageError(
            f"QUERY is missing after WORKING_DIR {words[0]!r} (to search for that word, give "
            f"the working dir first: search {DEFAULT_WORKING_DIR} {words[0]})"
        )
    query = " ".join(words)
    if not query.strip():
        raise UsageError("QUERY is empty")
    if not parse_query(query).terms:
        raise UsageError(f"QUERY {query!r} has no words to search for")
    config = _load_config(args.config)
    backend = _fleet(config)
    path = _state_dir(where, config) if backend is None else Path()
    if args.role is not None and args.role not in ROLES:
        raise CliError(f"--role must be one of {', '.join(ROLES)}; got {args.role!r}", code=2)
    if args.limit is not None and not 1 <= args.limit <= MAX_HITS:
        raise CliError(f"--limit must be from 1 to {MAX_HITS}; got {args.limit}", code=2)
    try:
        filters = Filters(
            agent=args.agent,
            session=args.session,
            role=args.role,
            tool=args.tool,
            since=parse_time(args.since, "--since"),
            until=parse_time(args.until, "--until"),
        )
    except ValueError as exc:
        raise CliError(str(exc), code=2) from None
    limit = args.limit or DEFAULT_HITS
    index = SearchIndex(path) if backend is None else backend.search
    try:
        result = index.search(query, filters, limit=limit, catch_up_seconds=None)
    except ContextError as exc:
        raise CliError(str(exc)) from None
    shared = args.agent is None
    print(format_result(result, query, shared=shared, max_bytes=1 << 20, sources=index.sources))
    return 0


# -- parser ----------------------------------------------------------------------------
