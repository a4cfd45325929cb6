"""The commands of `agentscope-ctx` that make files (`demo`, `config`), one function each,
taking the parsed arguments and returning the exit code (`inspect`, `search`, `read`, `gc`,
`consolidate`, `export` and `import` have a module each)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig
from ._common import (
    CliError,
    UsageError,
    _load_config,
    _new_demo_dir,
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
