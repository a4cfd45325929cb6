"""Demo "skills" — reading skills and long Markdown docs.

Several generated `skills/*/SKILL.md` files and long `docs/*.md` guides. Markdown sources get
the larger Markdown limits (instructions lose their meaning when cut), so a whole SKILL.md
enters the context where a log of the same size would be cut; a long guide is still cut,
and the agent reads on with `read_file`.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from ..core._private import private_dir, write_atomic
from ..tools import ShellTool
from ._runner import DemoSetup
from ._scripted import Move, Observation, Step, answer, call, follow

__all__ = ["generate_skills", "setup"]

_SKILLS = {
    "release-notes": "Write release notes from merged pull requests.",
    "incident-review": "Run a blameless incident review and write the report.",
    "db-migration": "Plan and apply a zero-downtime database migration.",
    "data-cleaning": "Clean a CSV export: types, duplicates, outliers.",
}
_VERBS = "check verify record compare rerun document confirm review archive notify".split()
_NOUNS = (
    "schema replica backup checksum changelog owner deadline rollback window dashboard alert "
    "ticket metric snapshot migration"
).split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_VERBS), "the", rng.choice(_NOUNS)]
    words += [rng.choice(_NOUNS + _VERBS) for _ in range(rng.randint(8, 16))]
    return " ".join(words).capitalize() + "."


def _skill(rng: random.Random, name: str, description: str) -> str:
    parts = [f"---\nname: {name}\ndescription: {description}\n---\n", f"# {name}\n"]
    for section in ("When to use", "Inputs", "Steps", "Checks", "Pitfalls", "Examples"):
        parts.append(f"\n## {section}\n")
        for k in range(1, 9):
            parts.append(f"{k}. {_sentence(rng)} {_sentence(rng)}\n")
    return "".join(parts)


def generate_skills(root: Path, *, seed: int = 11) -> dict[str, Any]:
    """Write `skills/*/SKILL.md` and `docs/*.md` under `root`."""
    rng = random.Random(seed)
    for name, description in _SKILLS.items():
        folder = root / "skills" / name
        private_dir(folder)
        write_atomic(folder / "SKILL.md", _skill(rng, name, description))
    docs = root / "docs"
    private_dir(docs)
    lines = ["# Operations runbook\n"]
    for chapter in range(1, 31):
        lines.append(f"\n## Chapter {chapter}: {rng.choice(_NOUNS)} procedures\n")
        if chapter == 24:
            lines.append(
                "\n### Rollback of a failed migration\n\n1. Stop the writers "
                "(`ops writers pause --all`).\n2. Restore the snapshot taken by step 3 of "
                "db-migration.\n3. Replay the WAL up to the last good LSN.\n4. Resume the "
                "writers and post in #ops.\n"
            )
        lines += [f"- {_sentence(rng)}\n" for _ in range(40)]
    write_atomic(docs / "runbook.md", "".join(lines))
    return {}


def _plan() -> list[list[Step]]:
    seen: dict[str, Any] = {}

    def find_skills(obs: Observation) -> Move:
        return call("run_shell", command="find skills -name SKILL.md")

    def read_skill(name: str) -> Step:
        return lambda obs: call("read_file", file_path=f"skills/{name}/SKILL.md")

    def read_runbook(obs: Observation) -> Move:
        return call("read_file", file_path="docs/runbook.md")

    def read_on(obs: Observation) -> Move:
        return follow(obs, call("run_shell", command="wc -l docs/runbook.md"))

    def grep_rollback(obs: Observation) -> Move:
        return call("run_shell", command="grep -n 'Rollback' docs/runbook.md")

    def open_rollback(obs: Observation) -> Move:
        line = int(obs.find(r"^(\d+):", "1"))
        seen["line"] = line
        return call("read_file", file_path="docs/runbook.md", start_line=line)

    def conclude(obs: Observation) -> Move:
        steps = obs.find(r"(1\. Stop the writers[^\n]*)", "1. Stop the writers")
        return answer(
            "Plan for the migration, following skills/db-migration/SKILL.md (read whole: "
            "Markdown keeps its larger limit) and docs/runbook.md:\n"
            "- use the db-migration skill's Steps and Checks sections;\n"
            f"- rollback is in docs/runbook.md line {seen.get('line')}: {steps} Then restore "
            "the snapshot, replay the WAL to the last good LSN, and resume the writers."
        )

    def read_release(obs: Observation) -> Move:
        return call("read_file", file_path="skills/release-notes/SKILL.md")

    def reread_runbook_end(obs: Observation) -> Move:
        return call("run_shell", command="tail -n 400 docs/runbook.md")

    def follow_tail(obs: Observation) -> Move:
        return follow(obs, call("run_shell", command="wc -l docs/runbook.md"))

    def done(obs: Observation) -> Move:
        return answer(
            "Release notes follow skills/release-notes/SKILL.md; the runbook's last chapters "
            "add nothing to the rollback procedure."
        )

    return [
        [
            find_skills,
            read_skill("db-migration"),
            read_skill("incident-review"),
            read_runbook,
            read_on,
            read_skill("data-cleaning"),
            grep_rollback,
            open_rollback,
            conclude,
        ],
        [read_release, reread_runbook_end, follow_tail, done],
    ]


async def setup(working_dir: Path) -> DemoSetup:
    """Generate the skills and docs and return the demo."""
    await asyncio.to_thread(generate_skills, working_dir)
    skill = (working_dir / "skills" / "db-migration" / "SKILL.md").stat().st_size
    runbook = (working_dir / "docs" / "runbook.md").stat().st_size
    return DemoSetup(
        title=(
            f"skills reader: 4 SKILL.md of ~{skill / 1e3:.0f} KB and a {runbook / 1e3:.0f} KB "
            "runbook; Markdown gets the larger limits"
        ),
        sys_prompt=(
            "You plan operations work. Skills live in skills/*/SKILL.md and guides in docs/; "
            "read them with read_file (follow truncation notices) and search with run_shell."
        ),
        tools=[ShellTool(working_dir).run_shell],
        prompts=[
            "We must migrate the orders database tonight. Which skill applies, and how do we "
            "roll back if it fails?",
            "Also prepare the release notes process.",
        ],
        turns=_plan(),
        context={
            "max_input_tokens": 14_000,
            "tool_result": {
                "recent_n": 3,
                "recent_max_bytes": 6_144,
                "old_max_bytes": 1_536,
                "markdown_recent_max_bytes": 16_384,
                "markdown_old_max_bytes": 3_072,
            },
        },
    )
