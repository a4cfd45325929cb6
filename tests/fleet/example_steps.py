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


def compactor_warnings(folder: Path) -> list[str]:
    """The lines of the example's process logs (FOLDER/*.log, whole) where the compactor
    warned: a model call that failed, a summary rejected until the extractive fallback."""
    return [
        line
        for log in sorted(folder.glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if "Compactor" in line or "extractive summary" in line
    ]
