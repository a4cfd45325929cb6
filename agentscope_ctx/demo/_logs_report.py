"""The texts the "logs" demo's scripted agent writes at the end (the incident report, the
status-page update and the chat message), from what its tools returned (`seen`)."""

from __future__ import annotations

from typing import Any

__all__ = ["drafts", "report"]


def _lines(seen: dict[str, Any], key: str, limit: int = 3) -> list[str]:
    text = str(seen.get(f"out:{key}", ""))
    return [line for line in text.splitlines() if line.strip()][:limit] or ["(nothing found)"]


def drafts(seen: dict[str, Any]) -> str:
    """The status-page update and the chat message, from the findings."""
    first = _lines(seen, "first", 1)[0]
    return "\n".join(
        [
            "## Status page",
            "**Checkout degraded (resolved pending fix).** From 03:29 UTC on 2026-11-28, many "
            "checkouts failed or hung: a storage volume shared by the order ledger and the "
            "database ran out of space. The checkout queue was paused to protect order data; "
            "no order was lost. We are freeing space, raising the quota, and will replay the "
            "paused checkouts. Next update within the hour.",
            "",
            "## Slack, #incidents",
            "Checkout outage 2026-11-28 03:29 UTC: worker-03 ledger-sync hit `Disk quota "
            "exceeded` on cache/ledger (first: "
            f"`{first}`); postgres hit `No space left on device` on the same volume "
            "(/var/lib/ledger). Queue paused, no data loss. Actions: free space + raise quota "
            "(storage team), replay paused checkouts (payments), alert at 80% (SRE). "
            f"Today's checkout requests on api-02 so far: {_lines(seen, 'resumed', 1)[0]}; "
            f"'queue paused' lines per log: {', '.join(_lines(seen, 'queue', 3))}.",
        ]
    )


def report(seen: dict[str, Any], *, detailed: bool) -> str:
    """The incident report, written from what the tools returned."""
    first, last = _lines(seen, "first", 1)[0], _lines(seen, "last", 3)[-1]
    parts = [
        "# Incident report: checkout outage, 2026-11-28",
        "",
        "## Summary",
        "Checkout failed for many users from about 03:29 UTC: worker-03's ledger-sync could "
        "not write its index (`OSError: [Errno 122] Disk quota exceeded`), which paused the "
        "checkout queue. postgres hit `No space left on device` on the same volume at the same "
        "minute.",
        "",
        "## Timeline (UTC, from the logs)",
        f"- first quota error: `{first}`",
        f"- checkout queue paused: `{_lines(seen, 'paused', 1)[0]}`",
        f"- postgres: `{_lines(seen, 'db', 1)[0]}`",
        f"- last quota error (still failing at the end of the logs): `{last}`",
    ]
    if detailed:
        parts += ["", "## Detection", "Nothing alerted on the volume; users reported it. Logs:"]
        parts += [f"- `{line}`" for line in _lines(seen, "checkpoint", 4)]
        parts += [f"- `{line}`" for line in _lines(seen, "first", 3)]
        parts += ["The last quota errors, at the end of the logs:"]
        parts += [f"- `{line}`" for line in _lines(seen, "last", 3)]
        parts += [
            f"- ledger-sync retries that failed: {_lines(seen, 'retries', 1)[0]}",
            f"- API lines naming the ledger (per host): {', '.join(_lines(seen, 'hosts', 2))}",
        ]
    parts += [
        "",
        "## Impact",
        "Every checkout after 03:29 waited on the paused queue; the API served other routes "
        f"normally (only transient, retried errors; {_lines(seen, 'slow', 1)[0]} slow queries "
        "on api-01, as usual).",
        "",
        "## Root cause",
        "cache/ledger and postgres share /var/lib/ledger; the ledger index outgrew the "
        "volume's quota.",
        "",
        "## Fix and follow-ups",
        "- free space on /var/lib/ledger and raise the quota;",
        "- resume the checkout queue and replay the paused checkouts;",
        "- alert on the volume's usage at 80%;",
        "- move cache/ledger to its own volume.",
    ]
    return "\n".join(parts)
