"""`agentscope-ctx inspect`: what a working dir (or the fleet store) holds, as text or, with
``--json``, as one JSON object (its shape: `docs/cli.md`, `INSPECT_VERSION`)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import ContextError
from ._common import CliError, _age, _load_config, _size, _state_dir, _tool_result_files

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

__all__ = ["INSPECT_VERSION"]

INSPECT_VERSION = 1
"""The ``version`` of `inspect --json`'s object; raised when a field changes meaning or goes."""


def _files(path: Path, summaries: dict[str, int]) -> dict[str, Any]:
    """What the working dir's dialog/ and tool_result/ hold (the files of `summaries`, the
    summaries' saved texts, apart from the outputs)."""
    from ..stores._dialog import DialogStore

    try:
        msgs, report = DialogStore(path).read()
    except ContextError as exc:
        raise CliError(f"working dir {str(path)!r} is corrupt: {exc}") from None
    days: dict[str, int] = {name.removesuffix(".jsonl"): 0 for name in report.files}
    for msg in msgs:
        day = str(msg.timestamp or "")[:10]
        days[day] = days.get(day, 0) + 1
    names = {Path(ref).name for ref in summaries}
    files = [p for p in _tool_result_files(path) if p.name not in names]
    times = [p.stat().st_mtime for p in files]
    return {
        "dialog": {
            "messages": report.messages,
            "days": dict(sorted(days.items())),
            "bad_lines": [
                {"file": name, "line": line, "reason": reason}
                for name, line, reason in report.bad_lines
            ],
        },
        "outputs": {
            "count": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "newest": max(times, default=None),
            "oldest": min(times, default=None),
        },
    }


def _fleet(backend: Any, summaries: dict[str, int]) -> dict[str, Any]:
    """What the fleet store holds (the database: its dialog days and saved outputs, but the
    summaries' saved texts of `summaries`)."""
    try:
        days = backend.dialog().day_counts()
        count, total, newest, oldest = backend.outputs().stats()
    except ContextError as exc:
        raise CliError(str(exc)) from None
    count, total = count - len(summaries), total - sum(summaries.values())
    return {
        "dialog": {"messages": sum(days.values()), "days": days, "bad_lines": []},
        "outputs": {"count": count, "bytes": total, "newest": newest, "oldest": oldest},
    }


def _saved_summaries(config: ContextConfig | None, path: Path) -> dict[str, int]:
    """The summaries' saved texts in the store (every session), by the mark the store
    recorded for each (`core.search._saved_summary`): not tool outputs, so `inspect` counts them
    apart (``saved_summaries``)."""
    from ..stores._export import local_saved_summaries, saved_summaries

    if config is None or config.store.kind != "postgres":
        return local_saved_summaries(path)  # (no config models loaded without --config)
    try:
        return saved_summaries(config)
    except ContextError as exc:
        raise CliError(str(exc)) from None


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """The facts `inspect` shows."""
    from ..stores._usage_file import read_usage
    from ._common import _fleet as open_fleet

    config: ContextConfig | None = _load_config(args.config)
    backend = open_fleet(config)
    if backend is not None:
        assert config is not None
        store = {"kind": "postgres", "schema": config.store.schema_name}
        summaries = _saved_summaries(config, Path(config.working_dir))
        facts = _fleet(backend, summaries)
        path = Path(args.working_dir or config.working_dir).expanduser()
        if args.working_dir is not None and not path.is_dir():
            path = _state_dir(args.working_dir, config)  # the usage error, as elsewhere
    else:
        store = {"kind": "local"}
        path = _state_dir(args.working_dir, config)
        summaries = _saved_summaries(config, path)
        facts = _files(path, summaries)
    memory_dir = path / "memory"
    notes = sorted(memory_dir.glob("*.md")) if memory_dir.is_dir() else []
    return {
        "version": INSPECT_VERSION,
        "working_dir": str(path.resolve()),
        "store": store,
        **facts,
        "saved_summaries": {"count": len(summaries), "bytes": sum(summaries.values())},
        "memory": [{"name": note.name, "bytes": note.stat().st_size} for note in notes],
        "usage": read_usage(path),
    }


def _usage_line(usage: dict[str, Any]) -> str:
    cache = usage.get("cache_reuse")
    provider = usage.get("provider_prompt_tokens")
    counter = usage.get("counter")
    how = f"{counter}, " if isinstance(counter, str) else ""
    session = usage.get("session")
    who = f"agent {usage.get('agent')!s}" + (f" (session {session})" if session else "")
    return (
        f"{who}: context {usage.get('prompt_tokens', 0):,} of "
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


def _context_lines(usage: dict[str, Any]) -> list[str]:
    """The breakdown of the context a usage record carries (`ContextBreakdown`), as Claude
    Code's ``/context`` shows it: each part's tokens and share of the budget, then what is
    free below the trigger and the budget; none for a record without one (older versions)."""
    from ..services._breakdown import ContextBreakdown

    data = usage.get("context")
    if not isinstance(data, dict):
        return []
    try:
        context = ContextBreakdown.from_dict(data)
    except ValueError:
        return []
    budget = max(context.budget, 1)
    lines = [
        "  in its context after the last reply (the context manager's count; the provider "
        f"counts x{context.scale:.2f}):"
    ]
    for name, label, tokens in context.parts():
        count = context.messages.get(name)
        what = f"{label} ({count})" if count is not None else label
        share = tokens * context.scale / budget
        lines.append(f"    {what:<36} {tokens:>9,} {share:>6.1%}")
    lines.append(
        f"    {'total':<36} {context.total:>9,} {context.calibrated_total / budget:>6.1%}"
        f" ({context.calibrated_total:,} as the provider counts)"
    )
    lines.append(
        f"    {f'free below the trigger ({context.threshold:,})':<36} "
        f"{context.free_below_trigger:>9,}"
    )
    lines.append(
        f"    {f'free below the budget ({context.budget:,})':<36} {context.free_below_budget:>9,}"
    )
    return lines


def render(facts: dict[str, Any]) -> str:
    """`inspect`'s text."""
    dialog, outputs = facts["dialog"], facts["outputs"]
    now = time.time()
    lines = []
    if facts["store"]["kind"] == "postgres":
        lines.append(f"store: the PostgreSQL store (schema {facts['store']['schema']})")
        lines.append(
            f"dialog: {dialog['messages']} messages over {len(dialog['days'])} day(s) "
            "(pg-dialog:DAY)"
        )
        lines += [f"  {day}: {n} messages" for day, n in dialog["days"].items()]
        lines.append(f"saved outputs: {outputs['count']}, {_size(outputs['bytes'])} (pg-output:ID)")
        if outputs["newest"] is not None and outputs["oldest"] is not None:
            lines.append(
                f"  last used {_age(now - outputs['newest'])} ago (newest), "
                f"{_age(now - outputs['oldest'])} ago (oldest)"
            )
        lines += _summaries_line(facts)
        lines.append(f"working dir (memory, usage): {facts['working_dir']}")
    else:
        lines.append(f"working dir: {facts['working_dir']}")
        lines.append(f"dialog/: {dialog['messages']} messages in {len(dialog['days'])} day file(s)")
        lines += [f"  {day}: {n} messages" for day, n in dialog["days"].items()]
        lines.append(f"tool_result/: {outputs['count']} saved output(s), {_size(outputs['bytes'])}")
        if outputs["count"]:
            lines.append(
                f"  newest {_age(now - outputs['newest'])} old, "
                f"oldest {_age(now - outputs['oldest'])} old"
            )
        lines += _summaries_line(facts)
    lines.append(f"memory/: {len(facts['memory'])} file(s)")
    lines += [f"  {note['name']}: {_size(note['bytes'])}" for note in facts["memory"]]
    for usage in facts["usage"]:
        lines += [_usage_line(usage), *_context_lines(usage)]
    return "\n".join(lines)


def _summaries_line(facts: dict[str, Any]) -> list[str]:
    saved = facts["saved_summaries"]
    if not saved["count"]:
        return []
    return [
        f"  and {saved['count']} summary(ies) shown cut, whole text saved beside them: "
        f"{_size(saved['bytes'])} (not tool outputs)"
    ]


def _cmd_inspect(args: argparse.Namespace) -> int:
    facts = collect(args)
    if args.json:
        print(json.dumps(facts, ensure_ascii=False, indent=2))
    else:
        print(render(facts))
    bad = facts["dialog"]["bad_lines"]
    if bad:
        first = bad[0]
        raise CliError(
            f"dialog/ is corrupt: {len(bad)} unreadable line(s), first "
            f"{first['file']}:{first['line']}: {first['reason']}"
        )
    return 0
