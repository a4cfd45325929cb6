"""The argument parser of `agentscope-ctx`."""

from __future__ import annotations

import argparse

from .._line import AGENTSCOPE_VERSION, IS_1X
from ._commands import _cmd_config, _cmd_demo
from ._common import DEMO_DIR, _non_negative_int, _positive_int, _retention_days
from ._consolidate import _cmd_consolidate
from ._export import add_export, add_import
from ._forget import add_forget
from ._inspect import _cmd_inspect
from ._read import _cmd_read
from ._search import _cmd_search
from ._view import add_view

AGENT = "ReActAgent" if IS_1X else "Agent"
"""The agent class of the installed line, as the help names it."""
LINE = f"AgentScope {AGENTSCOPE_VERSION}, the {'1.x' if IS_1X else '2.x'} line"


def _cmd_gc(args: argparse.Namespace) -> int:
    """`gc`, its module (retention: the config models, the stores) loaded when it runs."""
    from ._gc import _cmd_gc as run

    return run(args)


def version() -> str:
    """What ``--version`` prints: this package's version and the AgentScope it runs on."""
    from .. import __version__

    return f"agentscope-ctx {__version__} ({LINE})"


def _tenant_options(command: argparse.ArgumentParser, agent_help: str) -> None:
    """``--agent``, ``--user`` and ``--session``: one tenant (docs/tenants.md)."""
    command.add_argument("--agent", metavar="NAME", help=agent_help)
    command.add_argument("--user", metavar="ID", help="the end user of --agent (recall.user)")
    command.add_argument(
        "--session", metavar="ID", help="with --agent: that session only (--session= : no id)"
    )


def _dir_options(command: argparse.ArgumentParser, where: str, config_help: str) -> None:
    """A command's optional WORKING_DIR and its --config (what the config gives it)."""
    command.add_argument("working_dir", nargs="?", metavar="WORKING_DIR", help=where)
    command.add_argument("--config", metavar="FILE", help=config_help)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `agentscope-ctx`."""
    from ..core.search._search_hits import ROLES

    parser = argparse.ArgumentParser(
        prog="agentscope-ctx",
        description=f"Context-window management for AgentScope agents ({LINE}: its {AGENT}): "
        "demos, working-dir maintenance, and reading what left a context.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="run an offline demo (scripted model, real agent and tools)",
        description=f"Run an offline demo: a real {AGENT} with real tools and files and a "
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
    _dir_options(inspect, where, "config YAML (for working_dir)")
    inspect.add_argument("--json", action="store_true", help="one JSON object (shape: docs/cli.md)")
    inspect.set_defaults(func=_cmd_inspect)

    gc = sub.add_parser(
        "gc",
        help="delete expired tool_result files",
        description="Delete tool_result files older than the retention period. Run offline, "
        "gc cannot see the contexts of running agents: it deletes only expired files (a live "
        "agent keeps the expired files its messages still point to, and cleans up itself).",
    )
    _dir_options(gc, where, "config YAML (working_dir, retention_days)")
    gc.add_argument(
        "--retention-days",
        type=_retention_days,
        metavar="DAYS",
        help="age limit in days (default: tool_result.retention_days of --config, else 7)",
    )
    _tenant_options(gc, "only the saved outputs of this agent (of --user; in --session)")
    gc.add_argument("--json", action="store_true", help="one JSON object: what was removed")
    gc.set_defaults(func=_cmd_gc)

    cons = sub.add_parser(
        "consolidate",
        help="merge recent daily notes into memory/MEMORY.md (for cron)",
        description="Merge the recent daily notes memory/YYYY-MM-DD.md into memory/MEMORY.md "
        "(extractively: new bullets appended, duplicates dropped). Safe to rerun and to run "
        "from cron.",
    )
    _dir_options(cons, where, "config YAML (working_dir, days)")
    cons.add_argument("--days", type=int, metavar="N", help="days of notes to consider (>= 1)")
    cons.add_argument(
        "--agent",
        action="append",
        metavar="NAME",
        help="with a config naming the fleet store: the agent whose memory to consolidate "
        "(repeatable; default: every agent that has one)",
    )
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
        usage="agentscope-ctx search [-h] [--config FILE] [--agent NAME] [--user ID] [--role ROLE] "
        "[--tool NAME] [--since TIME] [--until TIME] [--session ID] [--limit N] [--json] "
        "[WORKING_DIR] QUERY",
        help="search the history of a working dir (what agents see with search_history)",
        description="Full-text search over dialog/, tool_result/ and memory/ of a working dir, "
        "ranked by relevance (BM25), newest first on ties; the same hits as the agents' "
        "search_history tool. Words must all match (else any); a quoted phrase "
        "matches exactly; word* matches a prefix. Each hit gives the agentscope-ctx read command "
        "that reads on (an agent reads on with read_file).",
    )
    search.add_argument(
        "words",
        nargs="+",
        metavar="[WORKING_DIR] QUERY",
        help=f"the query; a first argument naming an existing path (or starting with /, ~, ./ "
        f"or ../) is {where}, and must be a directory",
    )
    search.add_argument("--config", metavar="FILE", help="config YAML (for working_dir)")
    search.add_argument(
        "--agent",
        metavar="NAME",
        help="search as this agent would (of --user): every session of it, or --session's "
        "only (docs/tenants.md); default: the whole store",
    )
    search.add_argument("--user", metavar="ID", help="the end user of --agent (recall.user)")
    search.add_argument("--role", metavar="ROLE", help="only " + ", ".join(ROLES))
    search.add_argument("--tool", metavar="NAME", help="only calls and outputs of this tool")
    search.add_argument("--since", metavar="TIME", help="from this local time: 2026-12-02[ 14:30]")
    search.add_argument("--until", metavar="TIME", help="up to this local time (a date: all day)")
    search.add_argument(
        "--session", metavar="ID", help="only records of this session (--session= : no id)"
    )
    search.add_argument("--limit", type=int, metavar="N", help="number of hits (default 5)")
    search.add_argument("--json", action="store_true", help="one JSON object (shape: docs/cli.md)")
    search.set_defaults(func=_cmd_search)

    read = sub.add_parser(
        "read",
        usage="agentscope-ctx read [-h] [--start-line N] [--line-offset C] [--config FILE] "
        "[WORKING_DIR] REF",
        help="read a saved output or a dialog day from where a notice or a hit points",
        description="Follow a truncation notice or a search hit, as an agent does with "
        "read_file: REF is a file path (a saved output tool_result/..., a dialog day file), "
        "or a fleet-store ref (pg-output:ID, pg-dialog:YYYY-MM-DD: give --config naming the "
        "store). Prints an excerpt; when there is more, the command that reads on.",
    )
    read.add_argument(
        "refs",
        nargs="+",
        metavar="[WORKING_DIR] REF",
        help=f"what to read; a relative path is looked up in {where.removeprefix('the ')} and here",
    )
    read.add_argument(
        "--start-line", type=_positive_int, default=1, metavar="N", help="first line (from 1)"
    )
    read.add_argument(
        "--line-offset",
        type=_non_negative_int,
        default=0,
        metavar="C",
        help="characters to skip in the first line (a notice gives it for a very long line)",
    )
    read.add_argument("--config", metavar="FILE", help="config YAML (working_dir, store)")
    read.set_defaults(func=_cmd_read)
    add_view(sub, where)
    add_export(sub, where)
    add_import(sub)
    add_forget(sub, where)
    for command in sub.choices.values():  # a usage error shows the command's own usage
        command.set_defaults(command_parser=command)
    return parser
