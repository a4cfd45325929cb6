"""Retention on a local working dir (issue 47, docs/data.md): the `retention` config, each
kind deleted past its age by an injected clock, a tombstone for what a notice may name, the
search index without what is gone, and `gc` applying it with one audit line."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import Tenant
from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.core.ladder._tool_policy import ToolResultPolicy
from agentscope_ctx.recall._read_file import FileReader, ReadFileError
from agentscope_ctx.stores._audit import AuditFile
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._retention import RetentionDays, local_retention
from agentscope_ctx.stores._search import SearchIndex
from agentscope_ctx.stores._steps_file import StepFile
from agentscope_ctx.stores._tool_results import ToolResultStore
from agentscope_ctx.stores.factory import open_backend
from tests.support.lines import Msg

NOW = datetime(2026, 12, 6, 12, 0).timestamp()
"""The injected clock: every age counts back from it."""
OLD_DAY, NEW_DAY = "2026-11-01", "2026-12-05"


def test_the_section_its_defaults_and_the_outputs_field_it_relates_to() -> None:
    config = ContextConfig()
    assert config.retention.model_dump() == {
        "dialog_days": None,
        "outputs_days": None,
        "memory_days": None,
        "steps_days": None,
    }
    assert RetentionDays.of(config) == RetentionDays(outputs=7.0)  # tool_result.retention_days
    assert RetentionDays.of(ContextConfig(tool_result={"retention_days": 3})).outputs == 3
    kept = ContextConfig(retention={"outputs_days": 0, "dialog_days": 0, "steps_days": 2})
    assert RetentionDays.of(kept) == RetentionDays(steps=2)  # 0 keeps forever
    assert RetentionDays.of(ContextConfig(retention={"outputs_days": 30})).outputs == 30
    with pytest.raises(ValueError, match=r"retention\.dialog_days"):
        ContextConfig(retention={"dialog_days": -1})


def _stamp(day: str) -> str:
    return f"{day} 10:00:00.000"


async def _world(wd: Path) -> dict[str, str]:
    """Two tenants' records on two days (one past every limit), their outputs, notes and
    steps."""
    refs = {}
    for day, word in ((OLD_DAY, "quokka"), (NEW_DAY, "wombat")):  # a day is never written
        for agent in ("a1", "a2"):  # after a newer one (`DialogStore`): the old day first
            dialog = DialogStore(wd, record_fields={"agent": agent, "session": "s1"})
            msg = Msg("user", f"the {word} report of {agent}", "user")
            msg.timestamp = _stamp(day)
            await dialog.append([msg])
    for agent in ("a1", "a2"):
        store = ToolResultStore(wd, 7, owner=(agent, "s1"))
        refs[f"{agent} old"] = str(store.save(f"an old numbat output of {agent}\n" * 3))
        refs[f"{agent} new"] = str(store.save(f"a fresh platypus output of {agent}\n"))
        ten_days_ago = NOW - 10 * 86_400
        os.utime(refs[f"{agent} old"], (ten_days_ago, ten_days_ago))
        os.utime(refs[f"{agent} new"], (NOW - 3600, NOW - 3600))
        steps = StepFile(wd)
        for day in (OLD_DAY, NEW_DAY):
            steps.append({"at": f"{day}T10:00:00+00:00", "agent": agent, "session": "s1", "run": 1})
    memory = wd / "memory"
    memory.mkdir()
    for name in (f"{OLD_DAY}.md", f"{NEW_DAY}.md", "MEMORY.md"):
        (memory / name).write_text(f"- a note in {name}\n")
    return refs


def _reader(wd: Path, tenant: Tenant | None = None) -> FileReader:
    reader = FileReader(
        [wd], ToolResultPolicy(ContextConfig().tool_result), store_dir=wd / "tool_result"
    )
    return reader if tenant is None else reader.scoped(tenant)


async def test_each_kind_past_its_age_goes_with_its_index_entries(tmp_path: Path) -> None:
    wd = tmp_path / "w"
    refs = await _world(wd)
    search = SearchIndex(wd)
    assert search.search("quokka").hits and search.search("numbat").hits
    days = RetentionDays(dialog=30, outputs=7, memory=30, steps=30)
    live = [refs["a1 old"]]  # a live context still points to it: kept, whatever its age

    report = local_retention(wd, days, now=NOW, referenced=live, search=search)

    assert report.counts == {"dialog": 2, "outputs": 1, "memory": 1, "steps": 2}
    assert report.outputs == [refs["a2 old"]] and report.bytes > 0
    assert sorted(p.name for p in (wd / "dialog").glob("*.jsonl")) == [f"{NEW_DAY}.jsonl"]
    assert sorted(p.name for p in (wd / "memory").glob("*.md")) == [f"{NEW_DAY}.md", "MEMORY.md"]
    assert Path(refs["a1 old"]).exists() and not Path(refs["a2 old"]).exists()
    steps = StepFile(wd).read("s1")
    assert [s["at"][:10] for s in steps] == [NEW_DAY, NEW_DAY]
    # what is not expired is found as before; what is gone is not found
    assert not search.search("quokka").hits
    assert [str(h.path) for h in search.search("numbat").hits] == [refs["a1 old"]]
    assert {h.agent for h in search.search("wombat").hits} == {"a1", "a2"}
    assert search.search("platypus").hits
    search.close()
    # a second run finds nothing more
    again = local_retention(wd, days, now=NOW, referenced=live)
    assert not any(again.counts.values())


async def test_a_notice_to_a_deleted_output_says_deleted_by_retention_and_when(
    tmp_path: Path,
) -> None:
    wd = tmp_path / "w"
    refs = await _world(wd)
    local_retention(wd, RetentionDays(outputs=7, dialog=30), now=NOW)
    when = datetime.fromtimestamp(NOW).astimezone()
    for reader in (_reader(wd), _reader(wd, Tenant("a2", "s1"))):
        with pytest.raises(ReadFileError) as caught:
            reader.read_now(refs["a2 old"])
        text = str(caught.value)
        assert "was deleted by retention on" in text, text
        assert when.astimezone().strftime("%Y-%m-%d") in text or "UTC" in text
    # another tenant learns nothing of it: the same answer as for a ref that never existed
    with pytest.raises(ReadFileError, match="does not exist"):
        _reader(wd, Tenant("a1", "s1")).read_now(refs["a2 old"])
    # a dialog day past retention, to a tenant that had records there and to one that had not
    day = str(wd / "dialog" / f"{OLD_DAY}.jsonl")
    with pytest.raises(ReadFileError, match="was deleted by retention"):
        _reader(wd, Tenant("a1", "s1")).read_now(day)
    with pytest.raises(ReadFileError, match="does not exist"):
        _reader(wd, Tenant("a3", "s1")).read_now(day)
    # the fresh output reads as before
    assert "a fresh platypus output of a2" in _reader(wd, Tenant("a2", "s1")).read_now(
        refs["a2 new"]
    )
    stone = Path(refs["a2 old"] + ".deleted")
    assert json.loads(stone.read_text())["reason"] == "retention"
    assert "numbat" not in stone.read_text()  # a tombstone holds no data
    assert oct(stone.stat().st_mode & 0o777) == "0o600"


async def test_the_store_made_from_a_config_keeps_outputs_as_it_says(tmp_path: Path) -> None:
    wd = tmp_path / "w"
    refs = await _world(wd)
    forever = open_backend(ContextConfig(working_dir=wd, retention={"outputs_days": 0}))
    assert forever.outputs().cleanup([], now=NOW + 1e9) == []  # 0: kept forever
    assert forever.retention is None  # no other kind limited
    limited = open_backend(ContextConfig(working_dir=wd, retention={"steps_days": 30}))
    assert limited.retention is not None
    assert limited.retention(NOW).counts["steps"] == 2
    assert Path(refs["a1 old"]).exists()  # the outputs are the cleanup's, not this run's
    forever.close()
    limited.close()


async def test_gc_applies_the_section_and_writes_one_audit_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wd = tmp_path / "w"
    refs = await _world(wd)
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "working_dir": str(wd),
                "retention": {"dialog_days": 30, "memory_days": 30, "steps_days": 30},
            }
        )
    )
    assert main(["gc", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "gc: removed 2 tool_result file(s) older than 7 days" in out, out
    assert "gc: removed 2 dialog record(s) older than 30 days" in out, out
    assert "gc: removed 1 daily note(s) older than 30 days" in out, out
    assert "gc: removed 2 steps record(s) older than 30 days" in out, out
    assert not Path(refs["a1 old"]).exists() and Path(refs["a1 new"]).exists()
    assert main(["read", refs["a1 old"]]) == 1  # a person following the notice is told too
    assert "was deleted by retention on" in capsys.readouterr().err
    [line] = AuditFile(wd).read()
    assert line["action"] == "retention" and line["who"].startswith("cli:")
    assert line["counts"] == {"dialog": 2, "outputs": 2, "memory": 1, "steps": 2}
    assert line["bytes"] > 0 and line["tenant"] == {"user": None, "agent": None, "session": None}
    text = (wd / "audit.jsonl").read_text()
    assert "quokka" not in text and "numbat" not in text  # never the data
    assert main(["gc", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": 1,
        "removed": {"dialog": 0, "outputs": 0, "memory": 0, "steps": 0},
        "bytes": 0,
    }
    assert len(AuditFile(wd).read()) == 2


async def test_gc_keeps_outputs_forever_when_the_config_says_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wd = tmp_path / "w"
    refs = await _world(wd)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"working_dir": str(wd), "retention": {"outputs_days": 0}}))
    assert main(["gc", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "gc: saved outputs are kept forever (retention.outputs_days: 0); 4 kept" in out, out
    assert all(Path(ref).exists() for ref in refs.values())
    assert main(["gc", "--config", str(config), "--retention-days", "7"]) == 0  # as asked
    assert "gc: removed 2 tool_result file(s) older than 7 days" in capsys.readouterr().out
