"""`agentscope-ctx`: run the demos and look after a working directory from the shell.

Commands::

    agentscope-ctx demo [NAME] [--config FILE] [--model-config FILE] [--working-dir DIR]
    agentscope-ctx inspect [WORKING_DIR]
    agentscope-ctx config
    agentscope-ctx gc [WORKING_DIR] [--retention-days DAYS]
    agentscope-ctx consolidate [WORKING_DIR] [--days N]
    agentscope-ctx search [WORKING_DIR] QUERY [--agent NAME] [--role ROLE] [--tool NAME]
                          [--since TIME] [--until TIME] [--session ID] [--limit N]

Exit codes: 0 ok, 1 runtime failure (missing or corrupt working dir, I/O error, failed
demo), 2 usage error (bad arguments, invalid config), 141 when the reader of the output went
away (``| head``: stop quietly, as ``cat`` does). A runtime error is one line on stderr; a
usage error is the command's usage and one line saying what is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .core._errors import ContextError, ContextUsageError

if TYPE_CHECKING:
    from .core._config import ContextConfig

__all__ = ["main"]

DEFAULT_WORKING_DIR = Path("~/.agentscope_ctx")
DEMO_DIR = Path("agentscope_ctx_demo")
"""Where `demo` writes by default (in the current directory); when it is taken, the next
free ``agentscope_ctx_demo_2``, ``_3``, ... beside it."""
_STATE_DIRS = ("dialog", "tool_result", "memory", "usage")


class CliError(Exception):
    """A failure reported as one line on stderr; `code` is the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CliError):
    """A usage error found after parsing: shown with the command's usage, exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=2)


def _retention_days(text: str) -> float:
    """`--retention-days`: a finite number of days > 0."""
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days; got {text!r}") from None
    if not math.isfinite(days) or days <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of days > 0; got {text!r}")
    return days


def _looks_like_path(word: str) -> bool:
    return word in (".", "..") or word.startswith(("/", "~", "./", "../"))


# -- helpers ---------------------------------------------------------------------------


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _age(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86_400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86_400:.1f} days"


def _load_config(path: str | None) -> ContextConfig | None:
    if path is None:
        return None
    from .core._config import ContextConfig

    return ContextConfig.from_yaml(path)


def _holds_state(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_dir() for name in _STATE_DIRS)


def _demo_dirs() -> list[Path]:
    """The demo runs in the current directory, newest first."""
    name = DEMO_DIR.name
    runs = [p for p in Path.cwd().glob(f"{name}*") if re.fullmatch(rf"{name}(_\d+)?", p.name)]
    return sorted((p for p in runs if _holds_state(p)), key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    report = path / "report.svg"
    return (report if report.exists() else path).stat().st_mtime


def _new_demo_dir(parent: Path | None = None) -> Path:
    """`DEMO_DIR` (in `parent`, default the current directory) if absent or empty, else the
    first free ``agentscope_ctx_demo_N`` beside it."""
    base = DEMO_DIR if parent is None else parent / DEMO_DIR
    n = 1
    while True:
        path = base if n == 1 else Path(f"{base}_{n}")
        if not path.exists() or (path.is_dir() and not any(path.iterdir())):
            return path
        n += 1


def _state_dir(
    arg: str | None, config: ContextConfig | None, *, demo_fallback: bool = False
) -> Path:
    """The working dir to act on: it must exist and hold an agentscope_ctx state.

    Without an argument or a config, it is the default ``~/.agentscope_ctx``. When that holds
    no state and `demo_fallback` is set (read-only commands), the newest demo run in the
    current directory is used instead; otherwise the error says where the demos are.
    """
    raw = Path(arg) if arg else (config.working_dir if config else DEFAULT_WORKING_DIR)
    path = raw.expanduser()
    if arg is None and config is None and not _holds_state(path):
        demos = _demo_dirs()
        if demos and demo_fallback:
            print(f"(no state in the default {DEFAULT_WORKING_DIR}: showing the newest demo run)")
            return demos[0]
        where = f"; demo runs here: {', '.join(str(p) for p in demos)}" if demos else ""
        raise CliError(
            f"no agentscope_ctx state in the default working dir {str(path)!r}{where}; pass "
            f"WORKING_DIR (`agentscope-ctx demo` prints its own as 'working dir: ...')"
        )
    if not path.exists():
        raise CliError(f"working dir {str(path)!r} does not exist")
    if not path.is_dir():
        raise CliError(f"working dir {str(path)!r} is not a directory")
    present = [name for name in _STATE_DIRS if (path / name).exists()]
    if not present:
        raise CliError(
            f"working dir {str(path)!r} holds no agentscope_ctx state "
            "(no dialog/, tool_result/ or memory/)"
        )
    for name in present:
        if not (path / name).is_dir():
            raise CliError(f"working dir {str(path)!r} is corrupt: {name} is not a directory")
    return path


def _tool_result_files(path: Path) -> list[Path]:
    folder = path / "tool_result"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".txt")


# -- commands --------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import DEMOS, run_demo

    if args.name not in DEMOS:
        names = ", ".join(DEMOS)
        raise CliError(f"unknown demo {args.name!r}; expected one of: {names}", code=2)
    config = _load_config(args.config)
    models = None
    if args.model_config:
        from ._providers import load_models

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


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .stores._dialog import DialogStore
    from .stores._usage_file import read_usage

    config = _load_config(args.config)
    path = _state_dir(args.working_dir, config, demo_fallback=True)
    print(f"working dir: {path.resolve()}")
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
    if report.bad_lines:
        name, line, reason = report.bad_lines[0]
        raise CliError(
            f"dialog/ is corrupt: {len(report.bad_lines)} unreadable line(s), first "
            f"{name}:{line}: {reason}"
        )
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    print(
        Path(__file__).with_name("core").joinpath("default.yaml").read_text(encoding="utf-8"),
        end="",
    )
    return 0


def _cmd_gc(args: argparse.Namespace) -> int:
    from .stores._tool_results import ToolResultStore

    config = _load_config(args.config)
    path = _state_dir(args.working_dir, config)
    days = args.retention_days
    if days is None:
        days = config.tool_result.retention_days if config else 7.0
    if days <= 0:
        raise CliError(f"--retention-days must be > 0, got {days!r}", code=2)
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


def _cmd_consolidate(args: argparse.Namespace) -> int:
    from .memory._long_term import consolidate

    config = _load_config(args.config)
    path = _state_dir(args.working_dir, config)
    days = args.days or (config.consolidation.days if config else 7)
    report = asyncio.run(consolidate(path, days=days))
    if report.skipped:
        print(f"consolidate: skipped ({report.reason})")
        return 0
    if not report.notes:
        print("consolidate: nothing new to merge")
        return 0
    print(
        f"consolidate: merged {len(report.notes)} daily note(s) ({', '.join(report.notes)}) "
        f"into {path / 'memory' / 'MEMORY.md'}: {report.added} new bullet(s), by "
        f"{report.source}" + (f" ({report.reason})" if report.reason else "")
    )
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from .core._search_text import parse_query
    from .recall._search import Filters, SearchIndex
    from .recall._search_hits import DEFAULT_HITS, MAX_HITS, ROLES, format_result, parse_time

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
    path = _state_dir(where, config)
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
    result = SearchIndex(path).search(query, filters, limit=limit, catch_up_seconds=None)
    print(format_result(result, query, shared=args.agent is None, max_bytes=1 << 20))
    return 0


# -- parser ----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `agentscope-ctx`."""
    from .recall._search_hits import ROLES

    parser = argparse.ArgumentParser(
        prog="agentscope-ctx",
        description="Context-window management for AgentScope ReAct agents: demos and "
        "working-dir maintenance.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage error.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="run an offline demo (scripted model, real agent and tools)",
        description="Run an offline demo: a real ReActAgent with real tools and files and a "
        "SCRIPTED model (no LLM, no API key). Demos: logs (log detective, default), web (web "
        "reader), skills (SKILL.md and Markdown docs). Ends with a report and an SVG chart.",
    )
    demo.add_argument("name", nargs="?", default="logs", help="logs (default), web or skills")
    demo.add_argument(
        "--config",
        metavar="FILE",
        help="context settings (YAML; fields or under context:); its working_dir, if set, "
        f"holds the run: {DEMO_DIR}, then {DEMO_DIR}_2, ... inside it",
    )
    demo.add_argument(
        "--model-config",
        metavar="FILE",
        help="run on a real model instead of the scripted one: a YAML with a model: section "
        "(and optional compactor_model:), e.g. configs/providers/local_openai.yaml",
    )
    demo.add_argument(
        "--working-dir",
        metavar="DIR",
        help=f"where the demo writes (default: ./{DEMO_DIR} if absent or empty, else the "
        f"first free ./{DEMO_DIR}_N; inside the --config's working_dir when it sets one)",
    )
    demo.set_defaults(func=_cmd_demo)

    where = "the working dir (default: from --config, else ~/.agentscope_ctx)"
    inspect = sub.add_parser(
        "inspect",
        help="summarise a working dir",
        description="Summarise a working dir: dialog days and message counts, tool_result "
        "files (count, size, age), memory files. Without WORKING_DIR or --config: "
        f"~/.agentscope_ctx, or, when that holds nothing, the newest ./{DEMO_DIR}* demo run.",
    )
    inspect.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    inspect.add_argument("--config", metavar="FILE", help="config YAML (for working_dir)")
    inspect.set_defaults(func=_cmd_inspect)

    gc = sub.add_parser(
        "gc",
        help="delete expired tool_result files",
        description="Delete tool_result files older than the retention period. Run offline, "
        "gc cannot see the contexts of running agents: it deletes only expired files (a live "
        "agent keeps the expired files its messages still point to, and cleans up itself).",
    )
    gc.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    gc.add_argument("--config", metavar="FILE", help="config YAML (working_dir, retention_days)")
    gc.add_argument(
        "--retention-days",
        type=_retention_days,
        metavar="DAYS",
        help="age limit in days (default: tool_result.retention_days of --config, else 7)",
    )
    gc.set_defaults(func=_cmd_gc)

    cons = sub.add_parser(
        "consolidate",
        help="merge recent daily notes into memory/MEMORY.md (for cron)",
        description="Merge the recent daily notes memory/YYYY-MM-DD.md into memory/MEMORY.md "
        "(extractively: new bullets appended, duplicates dropped). Safe to rerun and to run "
        "from cron.",
    )
    cons.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    cons.add_argument("--config", metavar="FILE", help="config YAML (working_dir, days)")
    cons.add_argument("--days", type=int, metavar="N", help="days of notes to consider (>= 1)")
    cons.set_defaults(func=_cmd_consolidate)

    config = sub.add_parser(
        "config",
        help="print the default config (every field, commented)",
        description="Print the default config file, every field with its default and "
        "meaning, to start your own: agentscope-ctx config > my.yaml, then "
        "ContextConfig.from_yaml('my.yaml') or --config my.yaml.",
    )
    config.set_defaults(func=_cmd_config)

    search = sub.add_parser(
        "search",
        help="search the history of a working dir (what agents see with search_history)",
        description="Full-text search over dialog/, tool_result/ and memory/ of a working dir, "
        "ranked by relevance (BM25), newest first on ties; the same hits, in the same form, as "
        "the agents' search_history tool. Words must all match (else any); a quoted phrase "
        "matches exactly; word* matches a prefix. Each hit says how to read on with read_file.",
    )
    search.add_argument(
        "words",
        nargs="+",
        metavar="[WORKING_DIR] QUERY",
        help=f"the query; a first argument naming an existing path (or starting with /, ~, ./ "
        f"or ../) is {where}, and must be a directory",
    )
    search.add_argument("--config", metavar="FILE", help="config YAML (for working_dir)")
    search.add_argument("--agent", metavar="NAME", help="search as this agent (default: all)")
    search.add_argument("--role", metavar="ROLE", help="only " + ", ".join(ROLES))
    search.add_argument("--tool", metavar="NAME", help="only calls and outputs of this tool")
    search.add_argument("--since", metavar="TIME", help="from this local time: 2026-12-02[ 14:30]")
    search.add_argument("--until", metavar="TIME", help="up to this local time (a date: all day)")
    search.add_argument("--session", metavar="ID", help="only records of this session")
    search.add_argument("--limit", type=int, metavar="N", help="number of hits (default 5)")
    search.set_defaults(func=_cmd_search)
    for command in sub.choices.values():  # a usage error shows the command's own usage
        command.set_defaults(command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a reader that went away is found here, not at exit
        return code
    except BrokenPipeError:
        # `agentscope-ctx ... | head`: the rest of the output has no reader. Stop quietly with
        # the status of a process ended by SIGPIPE (as `cat` does), and send what is still
        # buffered nowhere, so that Python's flush at exit does not print a traceback.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no file descriptor behind sys.stdout (tests)
            pass
        return 141


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    command: argparse.ArgumentParser = args.command_parser
    if extra:  # reported by the command, with its usage (not the top-level one)
        return _usage(command, f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "days", None) is not None and args.days < 1:
        return _fail(f"--days must be >= 1, got {args.days}", 2)
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:
        return _usage(command, str(exc))
    except CliError as exc:
        return _fail(str(exc), exc.code)
    except ContextUsageError as exc:
        return _fail(str(exc), 2)
    except BrokenPipeError:
        raise
    except (ContextError, OSError) as exc:
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # no traceback for users; one line says what broke
        return _fail(f"unexpected {type(exc).__name__}: {exc}", 1)


def _usage(command: argparse.ArgumentParser, message: str) -> int:
    """A usage error as argparse shows one: the command's usage, then the message; exit 2."""
    command.print_usage(sys.stderr)
    print(f"{command.prog}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _fail(message: str, code: int) -> int:
    line = " ".join(message.split())
    print(f"agentscope-ctx: error: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
