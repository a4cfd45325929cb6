"""Which AgentScope versions the package admits (issue 20): 2.0.0-2.0.10 install under a plain
`agentscope>=1.0.18,<3` and then fail in `attach` (`FunctionTool` has no `permission=` before
2.0.11). The range leaves them out, and an install that has one anyway is refused at import
in one line naming the minimum. Line-neutral: runs on both lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agentscope_ctx._line import IS_1X, MIN_2X, require_supported

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
OLD_2X = ["2.0.0", "2.0.1", "2.0.2", "2.0.3", "2.0.4", "2.0.4.post1", "2.0.5", "2.0.6"]
OLD_2X += ["2.0.7", "2.0.7.post1", "2.0.8", "2.0.9", "2.0.10"]
"""Every 2.x release before 2.0.11 on PyPI (2026-12)."""


def _agentscope(section: list[str]) -> Requirement:
    [req] = [Requirement(r) for r in section if Requirement(r).name == "agentscope"]
    return req


def test_the_default_install_admits_1x_and_2x_from_the_minimum_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    default = _agentscope(project["dependencies"]).specifier
    for version in OLD_2X:
        assert version not in default, version
    for version in ["1.0.18", "1.0.21", MIN_2X, "2.0.12", "2.1.0"]:
        assert version in default, version
    assert "3.0.0" not in default
    # a 1.x project still installs through the extra; the 2.x extra starts at the minimum
    extras = project["optional-dependencies"]
    assert _agentscope(extras["agentscope1"]).specifier.contains("1.0.21")
    assert str(_agentscope(extras["agentscope2"]).specifier) == f"<3,>={MIN_2X}"


@pytest.mark.parametrize("version", OLD_2X)
def test_an_older_2x_is_refused_in_one_line_naming_the_minimum(version: str) -> None:
    with pytest.raises(ImportError) as caught:
        require_supported(version)
    message = str(caught.value)
    assert "\n" not in message
    assert f">= {MIN_2X}" in message and version in message


@pytest.mark.parametrize("version", ["1.0.18", "1.0.21", MIN_2X, "2.0.12", "2.1.0", "3.0.0"])
def test_supported_versions_pass(version: str) -> None:
    require_supported(version)


@pytest.mark.skipif(IS_1X, reason="the 2.x adapter's import on an older 2.x")
def test_importing_the_package_on_an_older_2x_fails_with_that_line() -> None:
    code = "import agentscope; agentscope.__version__ = '2.0.10'\nimport agentscope_ctx\n"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: agentscope_ctx needs AgentScope >= 2.0.11"), last
