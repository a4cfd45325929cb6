"""`agentscope-ctx forget`: remove every byte of one tenant from the store (`stores._forget`,
docs/data.md): what it will delete, by kind, then what it deleted; one audit line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core._errors import ContextUsageError
from ._common import UsageError, _load_config, _size, _state_dir

__all__ = ["add_forget", "cmd_forget"]


def add_forget(sub: argparse._SubParsersAction[argparse.ArgumentParser], where: str) -> None:
    """The ``forget`` subcommand."""
    forget = sub.add_parser(
        "forget",
        help="delete every byte of a user, an agent or a session from the store",
        description="Delete a tenant's data from the working dir's files or the fleet store "
        "--config names: its dialog records, saved outputs, search index entries, media, "
        "steps and usage records (on the fleet store also its long-term memory, unless "
        "--session is given). Prints what it will delete, by kind, then what it deleted, and "
        "writes one audit line (audit.jsonl, or the store's audit table). The working dir's "
        "memory/ is shared and left as it is. See docs/data.md.",
    )
    forget.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    forget.add_argument("--config", metavar="FILE", help="config YAML (working_dir, store)")
    forget.add_argument("--user", metavar="ID", help="the end user (alone: every agent of it)")
    forget.add_argument("--agent", metavar="NAME", help="the agent (of --user, when given)")
    forget.add_argument(
        "--session", metavar="ID", help="that session only (--session= : no id, with --agent)"
    )
    forget.add_argument(
        "--dry-run", action="store_true", help="show what would be deleted; delete nothing"
    )
    forget.add_argument(
        "--vacuum-full",
        action="store_true",
        help="fleet store: VACUUM FULL the touched tables (rewritten; locked meanwhile)",
    )
    forget.add_argument("--json", action="store_true", help="one JSON object (docs/data.md)")
    forget.set_defaults(func=cmd_forget)


def cmd_forget(args: argparse.Namespace) -> int:
    from ..core.config._config import ContextConfig
    from ..stores._audit import caller
    from ..stores._forget import ForgetReport, ForgetTarget, forget_store

    try:
        target = ForgetTarget(user=args.user, agent=args.agent, session=args.session)
    except ContextUsageError as exc:
        raise UsageError(str(exc).removeprefix("forget: ")) from None
    config = _load_config(args.config)
    if config is None or config.store.kind != "postgres":
        path = _state_dir(args.working_dir, config).resolve()
        config = (config or ContextConfig()).model_copy(update={"working_dir": path})
    elif args.working_dir is not None:
        path = _state_dir(args.working_dir, config).resolve()
        config = config.model_copy(update={"working_dir": path})
    where = (
        f"the fleet store (schema {config.store.schema_name})"
        if config.store.kind == "postgres"
        else f"the working dir {str(Path(config.working_dir))!r}"
    )
    plan = forget_store(config, target, dry_run=True)
    done: ForgetReport | None = None
    if not args.dry_run:
        done = forget_store(config, target, who=caller("cli"), vacuum_full=args.vacuum_full)
    if args.json:
        print(
            json.dumps(
                {
                    "store": plan.store,
                    "tenant": target.fields,
                    "will_delete": plan.as_dict()["counts"],
                    "will_delete_bytes": plan.as_dict()["bytes"],
                    "deleted": None if done is None else done.as_dict()["counts"],
                    "deleted_bytes": None if done is None else done.as_dict()["bytes"],
                    "notes": plan.notes,
                },
                ensure_ascii=False,
                sort_keys=True,
            )
        )
        return 0
    print(f"forget {_named(target)} in {where}")
    _table("will delete" if done is not None else "would delete (--dry-run)", plan)
    if done is None:
        print("nothing deleted (--dry-run)")
    else:
        _table("deleted", done)
    for note in plan.notes:
        print(f"kept: {note}")
    return 0


def _named(target: object) -> str:
    parts = [f"{k} {v!r}" for k, v in vars(target).items() if v is not None]
    return ", ".join(parts)


def _table(title: str, report: object) -> None:
    from ..stores._forget import ForgetReport

    assert isinstance(report, ForgetReport)
    print(f"{title}:")
    rows = [(k, n, report.bytes.get(k, 0)) for k, n in report.counts.items() if n]
    if not rows:
        print("  nothing")
    for kind, count, size in rows:
        print(f"  {kind:<12} {count:>8}  {_size(size) if size else ''}".rstrip())
