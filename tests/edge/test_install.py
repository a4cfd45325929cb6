"""Installing on either line (issue 14, item 3): a 1.x install missing its fixes is told to
install the `agentscope1` extra; other import failures pass through unchanged.

Each case imports the package in a fresh interpreter (the import under test is the first one).
A fresh `pip install agentscope==1.0.21` fails on exactly these (checked in a fresh venv): mcp 2
has no `streamablehttp_client`, and neither greenlet nor tqdm is installed. Here the real
AgentScope 1.x imports the real mcp 1.x with that name removed, or finds greenlet or tqdm
missing (`sys.modules[name] = None`, what Python does for a module that cannot be imported).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lines import requires_1x

ROOT = Path(__file__).resolve().parents[2]
HINT = 'in the clone of agentscope-ctx, pip install -e ".[agentscope1]"'


def import_package(prepare: str, then: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", f"{prepare}\nimport agentscope_ctx\n{then}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@requires_1x("AgentScope 1.x's own import failures")
@pytest.mark.parametrize(
    ("prepare", "original"),
    [
        pytest.param(
            "import mcp.client.streamable_http as m; del m.streamablehttp_client",
            "cannot import name 'streamablehttp_client'",
            id="mcp2",
        ),
        pytest.param(
            "import sys; sys.modules['greenlet'] = None",
            "requires that the Python 'greenlet' library is installed",
            id="no_greenlet",
        ),
        pytest.param("import sys; sys.modules['tqdm'] = None", "tqdm", id="no_tqdm"),
    ],
)
def test_i14_3_a_1x_install_without_its_fixes_names_the_extra(prepare: str, original: str) -> None:
    result = import_package(prepare)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: AgentScope 1.") and HINT in last, result.stderr
    assert original in last, result.stderr


def test_i14_3_other_import_failures_pass_through() -> None:
    # the names import on first use (issue 20): on 2.x, where `import agentscope` does not
    # need pydantic, the failure comes with the first name that does
    result = import_package(
        "import sys; sys.modules['pydantic'] = None", "from agentscope_ctx import ContextConfig"
    )
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "pydantic" in last and "agentscope1" not in result.stderr, result.stderr


def test_i14_3_the_package_imports() -> None:
    result = import_package("")
    assert result.returncode == 0, result.stderr
