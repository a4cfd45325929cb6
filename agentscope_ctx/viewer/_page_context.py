"""What each agent's context held after its last reply, as the viewer's page draws it (as
Claude Code's ``/context`` shows it): a bar of the budget and a table of the parts."""

from __future__ import annotations

from html import escape

from ._session import SessionView

__all__ = ["context_html"]


_PART_COLOURS = {
    "system_prompt": "#5d6d7e",
    "tool_schemas": "#aab7b8",
    "long_term_memory": "#16a085",
    "summary": "#8e44ad",
    "carried": "#c39bd3",
    "pinned": "#d35400",
    "recent": "#2471a3",
    "cut_outputs": "#27ae60",
    "masked_outputs": "#a9dfbf",
}
"""The colour of each part of a context breakdown (`services._breakdown.PART_LABELS`)."""


def context_html(view: SessionView) -> str:
    """What each agent's context held after its last reply, as Claude Code's ``/context``
    shows it: a bar of the budget (each part, then what is free below the trigger and
    between the trigger and the budget) and a table of the parts."""
    if not view.contexts:
        return (
            '<p id="no-context">No breakdown recorded for this session (its usage records '
            "were written before this version, or it has none in this working dir).</p>"
        )
    out = []
    for agent, when, context in view.contexts:
        budget = max(context.budget, 1)
        # the bar's whole: the budget, or the prompt when it is over the budget
        whole = max(context.calibrated_total, budget)

        def pct(tokens: float, whole: int = whole) -> str:
            return f"{100 * tokens / whole:.2f}%"

        bar, rows = [], []
        for name, label, tokens in context.parts():
            count = context.messages.get(name)
            tip = f"{label}: {tokens:,} tokens" + (f", {count} messages" if count else "")
            colour = _PART_COLOURS[name]
            if tokens:
                bar.append(
                    f'<span class="part" data-part="{name}" style="width:'
                    f'{pct(tokens * context.scale)};background:{colour}" title="{escape(tip)}">'
                    "</span>"
                )
            rows.append(
                f'<tr class="part" data-part="{name}"><td><i class="key" '
                f'style="background:{colour}"></i>{escape(label)}</td>'
                f'<td class="n">{"" if count is None else count}</td>'
                f'<td class="n">{tokens:,}</td>'
                f'<td class="n">{tokens * context.scale / budget:.1%}</td></tr>'
            )
        free = context.free_below_trigger
        reserve = context.free_below_budget - free
        bar.append(
            f'<span class="free" style="width:{pct(free)}" '
            f'title="free below the trigger: {free:,} tokens"></span>'
            f'<span class="reserve" style="width:{pct(reserve)}" '
            f'title="between the trigger and the budget: {reserve:,} tokens"></span>'
            f'<span class="trigger" style="left:{pct(context.threshold)}" '
            f'title="the compaction trigger: {context.threshold:,} tokens"></span>'
        )
        rows.append(
            f'<tr class="total"><td><b>total</b> ({context.calibrated_total:,} as the provider '
            f'counts, x{context.scale:.2f})</td><td></td><td class="n">{context.total:,}</td>'
            f'<td class="n">{context.calibrated_total / budget:.1%}</td></tr>'
            f'<tr class="free"><td>free below the trigger ({context.threshold:,})</td><td></td>'
            f'<td class="n">{free:,}</td><td></td></tr>'
            f'<tr class="free"><td>free below the budget ({context.budget:,})</td><td></td>'
            f'<td class="n">{context.free_below_budget:,}</td><td></td></tr>'
        )
        out.append(
            f'<div class="context" data-agent="{escape(agent)}"><h3>agent {escape(agent)} '
            f"<small>after its last reply ({escape(when)})</small></h3>"
            f'<div class="bar">{"".join(bar)}</div>'
            '<table class="parts"><thead><tr><th>part</th><th>messages</th><th>tokens</th>'
            f"<th>of the budget</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        )
    return "\n".join(out)
