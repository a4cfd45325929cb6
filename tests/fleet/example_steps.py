"""What the fleet example's workers recorded of each compaction: the steps records of a session
in the fleet store (the session viewer's, one per pipeline run), read as `agentscope-ctx view`
reads them, so that a test tells a summary its model wrote from the extractive fallback; and
the compactor's warnings in the processes' logs."""

from __future__ import annotations

import os
from pathlib import Path

from agentscope_ctx import ContextConfig
from agentscope_ctx.stores.factory import open_backend


def compaction_sources(env: dict[str, str], session: str) -> list[str]:
    """How each compaction of `session` got its summary (``model``, ``model_retry``,
    ``extractive``), oldest first; `env` is the example's (FOLDER/env.sh). Read as the
    operator's tools read it: with the maintenance config where the example has one (the
    steps of every tenant), else the workers'."""
    config = env.get("MAINTENANCE_CONFIG") or env["FLEET_CONFIG"]
    passwords = {k: v for k, v in env.items() if k.endswith("_PASSWORD")}
    before = {k: os.environ.get(k) for k in passwords}
    os.environ.update(passwords)
    try:
        backend = open_backend(ContextConfig.from_yaml(config))
        try:
            assert backend.steps is not None
            records = backend.steps.read(session)
        finally:
            backend.close()
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return [str(r.get("summary_source")) for r in records if r.get("compacted")]


def log_lines(folder: Path, *needles: str) -> list[str]:
    """The lines of the example's process logs (FOLDER/*.log, whole) holding any of
    `needles`."""
    return [
        line
        for log in sorted(folder.glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if any(needle in line for needle in needles)
    ]


def compactor_warnings(folder: Path) -> list[str]:
    """The log lines where the compactor warned: a model call that failed, a summary
    rejected until the extractive fallback."""
    return log_lines(folder, "Compactor", "extractive summary")


def check_compactions_and_indexing(env: dict[str, str], folder: Path, session: str) -> None:
    """`session` compacted, each summary the one the example's model server wrote
    (``model_retry``: its first answer was over the size limit, its second taken), none
    falling back to the extractive one (none logged a warning); and the workers (the
    workers' role) indexed what they saved as its saver's, at once: no "search index not
    updated ... row-level security" line in any log (issue 46 item 6)."""
    sources = compaction_sources(env, session)
    assert sources and set(sources) <= {"model", "model_retry"}, sources
    assert not compactor_warnings(folder)
    unindexed = log_lines(folder, "index not updated")
    assert not unindexed, unindexed
