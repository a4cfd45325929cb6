"""`agentscope-ctx view`: write a session's viewer page (`agentscope_ctx.viewer`), one
self-contained HTML file, from the working dir's files or the fleet store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import CliError, _load_config, _state_dir

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

__all__ = ["add_view", "cmd_view"]


def add_view(sub: argparse._SubParsersAction[argparse.ArgumentParser], where: str) -> None:
    """The ``view`` subcommand."""
    view = sub.add_parser(
        "view",
        help="write a session's viewer page (one self-contained HTML file)",
        description="Write one self-contained HTML page (no network needed) of a session: "
        "the prompt's size per model call before and after relief, the trigger and the "
        "budget, what each rung freed, each compaction with its summary, each notice linked "
        "to its saved output's excerpt, and a search box over the dialog that left the "
        "context. Reads the working dir's files, or the fleet store --config names; an "
        "excerpt as the session's agents' read_file reads it (their saved outputs, files "
        "below read_roots).",
    )
    view.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    view.add_argument("--config", metavar="FILE", help="config YAML (working_dir, store)")
    view.add_argument("--session", metavar="ID", help="the session (default: 'default')")
    view.add_argument(
        "--user", metavar="ID", help="the end user of the session's agents (recall.user)"
    )
    view.add_argument(
        "-o", "--output", metavar="FILE", help="where to write (default: WORKING_DIR/view.html)"
    )
    view.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    """Write the page; print where."""
    from ..core.config._config import ContextConfig
    from ..viewer import load_session, save_page

    config = _load_config(args.config)
    if config is not None and config.store.kind == "postgres":
        path = Path(args.working_dir or config.working_dir).expanduser()
        config = config.model_copy(update={"working_dir": path})
    else:
        path = _state_dir(args.working_dir, config)
        config = (config or ContextConfig()).model_copy(update={"working_dir": path})
    view = load_session(config, args.session, user=args.user)
    if not view.calls and not view.dialog:
        raise CliError(_nothing_to_show(config, view.session, given=args.session is not None))
    out = Path(args.output) if args.output else path / "view.html"
    if not args.output:  # a fleet store's working dir: named by the config, maybe never made
        path.mkdir(parents=True, exist_ok=True)
    save_page(view, out)
    print(f"{out} ({len(view.calls)} model calls, {len(view.dialog)} dialog messages)")
    return 0


def _nothing_to_show(config: ContextConfig, session: str, *, given: bool) -> str:
    """Why there is no page: the store (the fleet store by its schema, never the working
    dir it does not use) and the sessions it has steps of, to pass as ``--session``."""
    from ..stores.factory import open_backend

    where = str(config.working_dir)
    if config.store.kind == "postgres":
        where = f"the fleet store (schema {config.store.schema_name})"
    backend = open_backend(config)
    try:
        sessions = backend.steps.sessions() if backend.steps is not None else []
    finally:
        backend.close()
    asked = f"session {session!r}" + ("" if given else " (no --session given)")
    if not sessions:
        return f"no recorded steps or dialog for {asked} in {where}, nor for any other session"
    return (
        f"no recorded steps or dialog for {asked} in {where}; its sessions with recorded "
        f"steps: {', '.join(sessions)} (pass one as --session ID)"
    )
