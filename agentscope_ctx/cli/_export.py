"""`agentscope-ctx export` and `agentscope-ctx import`: a session as one self-contained
archive (`stores._archive`: JSONL, or the viewer's page with everything embedded), and back
into any store (docs/data.md). Each writes one audit line (`stores._audit`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._private import write_atomic
from ..stores._audit import audit, caller, open_audit
from ._common import CliError, _load_config, _size, _state_dir

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

__all__ = ["add_export", "add_import"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def add_export(sub: argparse._SubParsersAction[argparse.ArgumentParser], where: str) -> None:
    """The ``export`` subcommand."""
    export = sub.add_parser(
        "export",
        help="write one session as a self-contained archive (JSONL, or the viewer's page)",
        description="Write one session of the working dir or the fleet store (--config) as "
        "one self-contained file: its saved outputs (whole), dialog records, steps and "
        "summaries. --format jsonl (default) is the archive `import` reads; html is the "
        "session viewer's page with every output embedded whole, and the archive inside it "
        "(import reads it too). The file is written private (0600).",
    )
    export.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    export.add_argument("--config", metavar="FILE", help="config YAML (working_dir, store)")
    export.add_argument(
        "--session", metavar="ID", required=True, help="the session (recall.session)"
    )
    export.add_argument("--user", metavar="ID", help="only the agents of this end user")
    export.add_argument("--agent", metavar="NAME", help="only this agent (of --user)")
    export.add_argument("--format", choices=["jsonl", "html"], default="jsonl")
    export.add_argument(
        "-o", "--output", metavar="FILE", help="where to write (default: ./session-ID.jsonl|html)"
    )
    export.add_argument("--json", action="store_true", help="one JSON object: what was written")
    export.set_defaults(func=cmd_export)


def add_import(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``import`` subcommand."""
    imp = sub.add_parser(
        "import",
        help="restore a session archive into a working dir or the fleet store",
        description="Restore a session written by `export` (JSONL, or its HTML page) into the "
        "store --config names (a working dir, or the fleet store), or into --working-dir: its "
        "outputs saved anew (byte for byte) and the notices pointing at them, its dialog and "
        "steps; search and read_file serve it at once.",
    )
    imp.add_argument("file", metavar="FILE", help="the archive (.jsonl or .html)")
    imp.add_argument("--config", metavar="FILE", help="config YAML: the store to restore into")
    imp.add_argument(
        "--working-dir", metavar="DIR", help="restore into this working dir (made if missing)"
    )
    imp.add_argument("--json", action="store_true", help="one JSON object: what was restored")
    imp.set_defaults(func=cmd_import)


def _tenant(args: argparse.Namespace) -> dict[str, str | None]:
    return {"user": args.user, "agent": args.agent, "session": args.session}


def _where(config: ContextConfig) -> str:
    if config.store.kind == "postgres":
        return f"the fleet store (schema {config.store.schema_name})"
    return str(config.working_dir)


def cmd_export(args: argparse.Namespace) -> int:
    """Write the archive; say what it holds."""
    from .. import __version__
    from ..core.config._config import ContextConfig
    from ..stores._export import ExportReport, SessionFilter, export_session

    if args.user is not None and args.agent is None and not args.user:
        raise CliError("--user must not be empty", code=2)
    config = _load_config(args.config)
    if config is None or config.store.kind != "postgres":
        path = _state_dir(args.working_dir, config)
        config = (config or ContextConfig()).model_copy(update={"working_dir": path})
    which = SessionFilter(session=args.session, user=args.user, agent=args.agent)
    report = ExportReport()
    lines = list(export_session(config, which, report, package=__version__))
    if not any(report.counts.values()):
        raise CliError(f"no records of session {args.session!r} in {_where(config)}")
    ext = args.format
    out = Path(args.output or f"session-{_UNSAFE.sub('_', args.session) or 'default'}.{ext}")
    if ext == "html":
        data = _page(config, args, lines)
    else:
        data = "".join(_jsonl(line) for line in lines)
    write_atomic(out, data)
    audit(
        open_audit(config),
        "export",
        who=caller("cli"),
        store=config.store.kind,
        tenant=_tenant(args),
        counts=report.counts,
        bytes_=report.bytes,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "version": 1,
                    "file": str(out),
                    "format": ext,
                    "counts": report.counts,
                    "bytes": report.bytes,
                }
            )
        )
        return 0
    c = report.counts
    print(
        f"exported session {args.session!r} to {out}: {c['outputs']} saved output(s) "
        f"({_size(report.bytes)}), {c['dialog']} dialog record(s), {c['steps']} step(s), "
        f"{c['summaries']} summary(ies){_saved_summaries(c)}"
    )
    return 0


def _saved_summaries(counts: dict[str, int]) -> str:
    """How many summaries shown cut had their whole text saved (and exported or imported
    with the outputs, counted apart: `core.search._saved_summary`), when any did."""
    n = counts.get("saved_summaries", 0)
    return f", and the whole text of {n} summary(ies) shown cut" if n else ""


def _jsonl(line: dict[str, Any]) -> str:
    try:
        text = json.dumps(line, ensure_ascii=False)
        text.encode("utf-8")  # (raises for a lone surrogate)
        return text + "\n"
    except UnicodeEncodeError:  # a lone surrogate: escaped, as JSON round-trips it
        return json.dumps(line) + "\n"


def _page(config: ContextConfig, args: argparse.Namespace, lines: list[dict[str, Any]]) -> str:
    """The viewer's page of the session, each output whole, the archive embedded."""
    from ..stores._archive import ARCHIVE_ELEMENT
    from ..viewer import load_session
    from ..viewer._page import render_page, script_json

    view = load_session(config, args.session or "default", user=args.user)
    for line in lines:
        if line["kind"] == "output":
            text = line.get("text")
            view.excerpts[line["ref"]] = text if text is not None else "(binary output)"
            view.sizes[line["ref"]] = line["bytes"]
    page = render_page(view)
    safe = json.loads(json.dumps(lines))  # (a lone surrogate escaped, as the JSONL does)
    element = (
        f'<script type="application/json" id="{ARCHIVE_ELEMENT}">{script_json(safe)}</script>\n'
    )
    return page.replace("</body>", element + "</body>", 1) if "</body>" in page else page + element


def cmd_import(args: argparse.Namespace) -> int:
    """Restore the archive; say what was restored, and where."""
    from ..core.config._config import ContextConfig
    from ..stores._archive import parse_archive
    from ..stores._import import import_archive

    config = _load_config(args.config) or ContextConfig()
    if args.working_dir:
        wd = Path(args.working_dir).expanduser()
        if wd.exists() and not wd.is_dir():
            raise CliError(f"--working-dir {str(wd)!r} is not a directory", code=2)
        local = config.store.model_copy(update={"kind": "local"})
        config = config.model_copy(update={"working_dir": wd.resolve(), "store": local})
    try:
        text = Path(args.file).read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise CliError(f"{args.file!r} does not exist") from None
    archive = parse_archive(text)
    report = asyncio.run(import_archive(config, archive))
    header = archive.header
    audit(
        open_audit(config),
        "import",
        who=caller("cli"),
        store=config.store.kind,
        tenant={k: header.get(k) for k in ("user", "agent", "session")},
        counts=report.counts,
        bytes_=report.bytes,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "version": 1,
                    "session": header.get("session"),
                    "into": _where(config),
                    "counts": report.counts,
                    "bytes": report.bytes,
                    "refs": report.refs,
                }
            )
        )
        return 0
    c = report.counts
    print(
        f"imported session {header.get('session')!r} into {_where(config)}: "
        f"{c['outputs']} saved output(s) ({_size(report.bytes)}), {c['dialog']} dialog "
        f"record(s), {c['steps']} step(s){_saved_summaries(c)}"
    )
    return 0
