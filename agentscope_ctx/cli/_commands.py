"""The commands of `agentscope-ctx` that change or make files (`demo`, `config`, `gc`,
`consolidate`), one function each, taking the parsed arguments and returning the exit code
(`inspect`, `search` and `read` have a module each)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from ..core._errors import ContextError

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
from ._common import (
    CliError,
    UsageError,
    _fleet,
    _load_config,
    _new_demo_dir,
    _size,
    _state_dir,
    _tool_result_files,
    cli_tenant,
)


def _cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import DEMOS, run_demo

    if args.name not in DEMOS:
        names = ", ".join(DEMOS)
        raise UsageError(f"unknown demo {args.name!r}; expected one of: {names}")
    config = _load_config(args.config)
    models = None
    if args.model_config:
        from .._providers import load_models

        models = load_models(args.model_config)
        if models is None:
            raise CliError(f"{args.model_config!r} has no model: section", code=2)
    working_dir = _demo_working_dir(args.working_dir, config)
    if working_dir.exists() and not working_dir.is_dir():
        raise UsageError(f"--working-dir {str(working_dir)!r} is not a directory")
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


def _cmd_config(args: argparse.Namespace) -> int:
    print(
        Path(__file__)
        .parent.parent.joinpath("core", "config", "default.yaml")
        .read_text(encoding="utf-8"),
        end="",
    )
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from ..stores._tool_results import ToolResultStore

    config = _load_config(args.config)
    tenant = cli_tenant(args)
    days = args.retention_days
    if days is None:
        days = config.tool_result.retention_days if config else 7.0
    if days <= 0:
        raise CliError(f"--retention-days must be > 0, got {days!r}", code=2)
    if config is not None and config.store.kind == "postgres":  # its outputs unused > days
        retention = config.tool_result.model_copy(update={"retention_days": days})
        backend = _fleet(config.model_copy(update={"tool_result": retention}))
        outputs = backend.outputs(tenant=tenant)
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
    removed = store.cleanup(referenced=[], only=tenant)
    freed = sum(sizes.get(p.resolve(), 0) for p in removed)
    left = len(_tool_result_files(path))
    print(
        f"gc: removed {len(removed)} tool_result file(s) older than {days:g} days "
        f"({_size(freed)}); {left} kept"
    )
    return 0
