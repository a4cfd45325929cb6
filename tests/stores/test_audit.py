"""The audit trail (`stores._audit`): one line per action, never the data, to the log and to
``audit.jsonl`` (0600) of a local working dir."""

from __future__ import annotations

import logging
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores._audit import AuditFile, audit, caller, open_audit


def test_a_line_goes_to_the_log_and_to_a_private_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = open_audit(ContextConfig(working_dir=tmp_path))
    assert isinstance(sink, AuditFile)
    at = datetime(2026, 12, 6, 16, 0, tzinfo=timezone.utc)
    with caplog.at_level(logging.INFO, logger="agentscope_ctx.audit"):
        audit(
            sink, "retention", who="cli:op", store="local", counts={"outputs": 2}, bytes_=10, now=at
        )
        audit(sink, "export", who="cli:op", store="local", tenant={"agent": "a", "session": "s"})
    lines = sink.read()
    assert lines[0] == {
        "v": 1,
        "at": "2026-12-06T16:00:00.000+00:00",
        "action": "retention",
        "who": "cli:op",
        "store": "local",
        "tenant": {"user": None, "agent": None, "session": None},
        "counts": {"outputs": 2},
        "bytes": 10,
    }
    assert lines[1]["tenant"] == {"user": None, "agent": "a", "session": "s"}
    assert stat.S_IMODE((tmp_path / "audit.jsonl").stat().st_mode) == 0o600
    assert sum("agentscope_ctx audit:" in r.getMessage() for r in caplog.records) == 2


def test_a_sink_that_fails_is_logged_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "audit.jsonl").mkdir()  # cannot be appended to
    line = audit(AuditFile(tmp_path), "import", who=caller(), store="local")
    assert line["action"] == "import" and line["who"].startswith("cli:")
    assert "cannot write the audit line of import" in caplog.text
    assert caller("task").startswith("task:")
