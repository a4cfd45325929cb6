"""`agentscope-ctx`: run the demos, look after a working directory, and follow what left a
context, from the shell (docs/cli.md).

Commands::

    agentscope-ctx --version
    agentscope-ctx demo [NAME] [--config FILE] [--model-config FILE] [--working-dir DIR]
    agentscope-ctx inspect [WORKING_DIR] [--config FILE] [--json]
    agentscope-ctx config
    agentscope-ctx gc [WORKING_DIR] [--config FILE] [--retention-days DAYS] [--json]
    agentscope-ctx consolidate [WORKING_DIR] [--config FILE] [--days N] [--agent NAME]
    agentscope-ctx search [WORKING_DIR] QUERY [--config FILE] [--agent NAME] [--role ROLE]
                          [--tool NAME] [--since TIME] [--until TIME] [--session ID]
                          [--limit N] [--json]
    agentscope-ctx read [WORKING_DIR] REF [--start-line N] [--line-offset C] [--config FILE]
    agentscope-ctx view [WORKING_DIR] [--config FILE] [--session ID] [--user ID] [-o FILE]
    agentscope-ctx export [WORKING_DIR] --session ID [--user ID] [--agent NAME]
                          [--format jsonl|html] [--config FILE] [-o FILE] [--json]
    agentscope-ctx import FILE [--config FILE] [--working-dir DIR] [--json]
    agentscope-ctx forget [WORKING_DIR] [--user ID] [--agent NAME] [--session ID]
                          [--config FILE] [--dry-run] [--vacuum-full] [--json]

A command's options may come anywhere among its arguments (``search DIR --json QUERY``).

Exit codes: 0 ok, 1 runtime failure (a working dir that holds no state or is corrupt, an I/O
error, a failed demo, an unreachable model server: named by its URL), 2 usage error (bad
arguments, a WORKING_DIR that is no directory, an invalid config), 141 when the reader of the
output went away (``| head``: stop quietly, as ``cat`` does). A runtime error is one line on
stderr; a usage error is the command's usage and one line saying what is wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..core._errors import ContextError, ContextUsageError
from ._common import CliError, UsageError
from ._parser import build_parser

__all__ = ["main"]


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
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parser.parse_known_args(words)
        if extra:  # options anywhere: `search DIR --json QUERY` (issue 48)
            args, extra = _intermixed(args, words)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    command: argparse.ArgumentParser = args.command_parser
    if extra:  # reported by the command, with its usage (not the top-level one)
        return _usage(command, f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "days", None) is not None and args.days < 1:
        return _usage(command, f"--days must be >= 1, got {args.days}")
    return _run(args)


def _intermixed(args: argparse.Namespace, words: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The command's arguments parsed again with its options anywhere among its positionals.

    argparse fills a positional from the words before the first option, so in
    ``search DIR --json QUERY`` the words were DIR alone and QUERY was left over
    ("unrecognized arguments"). The top-level parser cannot parse intermixed (it has
    subcommands); the command's own parser can.
    """
    command: argparse.ArgumentParser = args.command_parser
    own = words[words.index(args.command) + 1 :]
    again, extra = command.parse_known_intermixed_args(own)
    return argparse.Namespace(**{**vars(args), **vars(again)}), extra


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command: its errors become one line on stderr and an exit code."""
    command: argparse.ArgumentParser = args.command_parser
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
        from ..core._unreachable import unreachable

        return _fail(unreachable(exc) or f"unexpected {type(exc).__name__}: {exc}", 1)


def _usage(command: argparse.ArgumentParser, message: str) -> int:
    """A usage error as argparse shows one: the command's usage, then the message; exit 2."""
    command.print_usage(sys.stderr)
    print(f"{command.prog}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _fail(message: str, code: int) -> int:
    line = " ".join(message.split())
    print(f"agentscope-ctx: error: {line}", file=sys.stderr)
    return code
