"""AgentScope 1.x beside 2.x: ``python -m benchmarks.compare`` (from the repository root).

Reads ``benchmarks/results/latest-1.x.json`` and ``latest-2.x.json`` (written by
``python -m benchmarks`` run in a venv of each line, e.g.
``/work/venv/bin/python -m benchmarks pipeline cost`` then
``/work/venv2/bin/python -m benchmarks pipeline steady2 cost``) and prints the steady step
and the cost scenarios of both lines side by side. Nothing is measured here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _load(line: str) -> dict[str, Any]:
    path = RESULTS / f"latest-{line}.json"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run `python -m benchmarks` on AgentScope {line}")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _steady(data: dict[str, Any], bench: str) -> dict[str, Any]:
    result = data["benchmarks"].get(bench) or {}
    steady: dict[str, Any] = result.get("steady", {})
    return steady


def steady_table(one: dict[str, Any], two: dict[str, Any]) -> list[str]:
    """The per-step cost by history size: 1.x's pipeline, 2.x's core pipeline, 2.x's adapter."""
    columns = [
        ("1.x pipeline", _steady(one, "pipeline")),
        ("2.x pipeline", _steady(two, "pipeline")),
        ("2.x adapter", _steady(two, "steady2")),
    ]
    head = f"{'messages':>8}" + "".join(f"{name + ' mean/median us':>30}" for name, _ in columns)
    lines = [head, "-" * len(head)]
    for size in ("50", "200", "800", "3200"):
        cells = []
        for _, rows in columns:
            row = rows.get(size)
            cells.append(
                f"{'-':>30}"
                if row is None
                else f"{row['step_mean_us']:>20,.0f} / {row['step_median_us']:>7,.0f}"
            )
        lines.append(f"{size:>8}" + "".join(cells))
    return lines


def cost_table(one: dict[str, Any], two: dict[str, Any]) -> list[str]:
    """Every cost scenario and system, a row per line."""
    head = (
        f"{'scenario':<14}{'system':<15}{'line':>5}{'calls':>6}{'fail':>5}{'peak':>10}{'over':>5}"
        f"{'sent':>12}{'reuse':>7}{'cost':>9}{'h.sent':>11}{'lost':>5}{'reach':>7}"
    )
    lines = [head, "-" * len(head)]
    scenarios: dict[str, dict[str, Any]] = {}
    for line, data in (("1.x", one), ("2.x", two)):
        for name, result in (data["benchmarks"].get("cost") or {}).get("scenarios", {}).items():
            scenarios.setdefault(name, {})[line] = result["systems"]
    for name, by_line in scenarios.items():
        systems = dict.fromkeys(s for rows in by_line.values() for s in rows)
        for system in systems:
            for line, rows in by_line.items():
                r = rows.get(system)
                if r is None:
                    continue
                a = r["agent"]
                lines.append(
                    f"{name:<14}{system:<15}{line:>5}{a['calls']:>6}{r.get('failed_calls', 0):>5}"
                    f"{a['peak_budget_tokens']:>10,}{a['over_budget']:>5}{a['tokens_sent']:>12,}"
                    f"{a['reuse']:>7.2f}{r['total_cost_units']:>9,.0f}"
                    f"{r['helper']['tokens_sent']:>11,}"
                    f"{'no' if r['nothing_lost']['ok'] else 'YES':>5}"
                    f"{r['reachable']['reachable_share']:>7.0%}"
                )
    return lines


def main() -> list[str]:
    """Print both tables; return their lines."""
    one, two = _load("1.x"), _load("2.x")
    versions = f"AgentScope {one['machine']['agentscope']} / {two['machine']['agentscope']}"
    lines = [f"steady step, {versions}", *steady_table(one, two), ""]
    lines += ["cost scenarios (cost: the agent's and the helpers' cost units)"]
    lines += cost_table(one, two)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
