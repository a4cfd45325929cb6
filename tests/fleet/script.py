"""The script of the fleet session, shared by both lines: turns, tool calls, data files.

Turn `t` asks to read `steps` files; each file is a few hundred lines (large enough to be
cut: about 14 KB) and holds one fact, a sentence with a code word unique to it, that
`search_history` must find from any worker once the file's output left the context.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = "You are a careful assistant that reads data files."
USER_TEXT = "task {turn}: read the next batch of data files"
DONE_TEXT = "turn {turn} done"
WORDS = ("quokka", "narwhal", "axolotl", "pangolin", "okapi", "tapir", "dugong", "saiga")


def user_id(turn: int) -> str:
    return f"user-{turn}"


def call_id(turn: int, step: int, attempt: str) -> str:
    """A tool call's id: unique to its turn, step and attempt (a replay of a turn after a
    kill makes new calls with new ids, as a provider's model would)."""
    return f"c{turn}x{step}-{attempt}"


def parse_call_id(key: str) -> tuple[int, int, str]:
    """`(turn, step, attempt)` of a `call_id`."""
    head, _, attempt = key.partition("-")
    turn, _, step = head[1:].partition("x")
    return int(turn), int(step), attempt


def new_attempt() -> str:
    """A fresh attempt id (one per run of a turn)."""
    import uuid

    return uuid.uuid4().hex[:8]


def file_name(turn: int, step: int) -> str:
    return f"data-{turn}-{step}.txt"


def fact(turn: int, step: int) -> str:
    """The fact in one file: a code word and number unique to it."""
    return f"the {WORDS[(turn + step) % len(WORDS)]} code of batch {turn} file {step} is {turn * 1000 + step * 7 + 13}"


def file_text(turn: int, step: int) -> str:
    lines = [
        f"{turn}-{step} row {i}: status=ok value={i * (step + 1)} 用户 😀\n" for i in range(300)
    ]
    lines.insert(150 + step, f"FACT: {fact(turn, step)}\n")
    return "".join(lines)


def write_files(folder: Path, turns: int, steps: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for turn in range(turns):
        for step in range(steps):
            path = folder / file_name(turn, step)
            if not path.exists():
                path.write_text(file_text(turn, step), encoding="utf-8")


def worker_fields(store: dict[str, Any]) -> dict[str, Any]:
    """A store's `ContextConfig` fields as this worker process takes them: ``{worker}`` in
    ``working_dir`` becomes the process id (a store other than the local one gives each
    worker a directory of its own: nothing reaches the other worker but through the store)."""
    fields = dict(store)
    if "working_dir" in fields:
        fields["working_dir"] = str(fields["working_dir"]).replace("{worker}", str(os.getpid()))
    return fields
