"""The probes benchmark (`benchmarks/pipeline/probes.py`) on both lines: what code guarantees
after 1, 3 and 10 compactions holds whoever writes the summary: every file touched and the
current task are in the next prompt, with a lazy model and with the extractive fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.pipeline import probes as bench_probes


@pytest.mark.parametrize("kind", ["coding", "logs", "web"])
@pytest.mark.parametrize("writer", ["lazy", "extractive"])
async def test_code_guarantees_hold_after_1_3_10_compactions(
    tmp_path: Path, kind: str, writer: str
) -> None:
    scores = await bench_probes._session(kind, writer, tmp_path)
    assert sorted(scores) == [1, 3, 10]
    for n, by_kind in scores.items():
        assert by_kind["trail"] == 1.0, (n, by_kind)
        assert by_kind["continuation"] == 1.0, (n, by_kind)


async def test_a_good_writer_answers_every_probe(tmp_path: Path) -> None:
    scores = await bench_probes._session("coding", "good", tmp_path)
    assert all(v == 1.0 for by_kind in scores.values() for v in by_kind.values()), scores
