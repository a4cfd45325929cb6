"""`python -m benchmarks NAME --option ...`: the options after a benchmark's name reach that
benchmark, parsed as its module run alone parses them. Parsed here, never run: the benchmarks
are recorded in place of running."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench_all
from benchmarks.store import stores as bench_stores


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """What each benchmark of the installed line was called with (none runs)."""
    calls: dict[str, dict[str, Any]] = {}

    def recorder(name: str) -> Any:
        def run(**options: Any) -> dict[str, Any]:
            calls[name] = options
            return {}

        return run

    monkeypatch.setattr(bench_all, "RESULTS", tmp_path / "latest.json")
    monkeypatch.setattr(bench_all, "BENCHES", [(n, recorder(n)) for n, _ in bench_all.BENCHES])
    return calls


def test_options_after_a_name_reach_that_benchmark(
    recorded: dict[str, dict[str, Any]],
) -> None:
    argv = ["store", "--large", "--stores", "local", "pins"]
    bench_all.main(argv)
    assert set(recorded) == {"store", "pins"}
    assert recorded["pins"] == {}  # its defaults
    store = recorded["store"]
    assert store == bench_stores.options(["--large", "--stores", "local"])
    assert store["large"] is True and store["stores"] == ["local"]
    assert store["rebuild"] is True and store["points"] is None


def test_the_store_bench_reads_no_options_of_another_command(
    recorded: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["benchmarks", "store", "--large"])
    bench_all.main(["store"])
    assert recorded["store"] == {}
    assert bench_stores.main.__kwdefaults__["large"] is False


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--large"], "options go after the name"),
        (["nope"], "unknown benchmark(s): ['nope']"),
        (["tokens", "--large"], "benchmark 'tokens' takes no options; got ['--large']"),
    ],
)
def test_words_that_reach_no_benchmark_stop_before_any_runs(
    recorded: dict[str, dict[str, Any]], argv: list[str], said: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_all.main(argv)
    assert said in str(stopped.value)
    assert not recorded


def test_a_benchmark_rejects_an_option_it_does_not_have(
    recorded: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench_all.main(["store", "--stores", "nowhere"])
    assert "invalid choice: 'nowhere'" in capsys.readouterr().err
    assert not recorded
