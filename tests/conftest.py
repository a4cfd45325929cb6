"""Suite-wide settings.

Hypothesis runs derandomized under ``CI=true`` (profile ``ci``): a CI run never passes or fails
by chance. A case a fuzzer finds locally is a bug to fix, pinned with ``@example``. No profile
has a deadline: a per-example time limit is a wall-clock assertion, and on a loaded 2-core
machine it failed a chart test by chance (254 ms against 200 ms); speed is measured in
`benchmarks/`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from tests.support.agent_line import Line

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev")


@pytest.fixture
def line() -> Line:
    """The installed AgentScope line: a real agent of it with a `ContextManager`, its fake
    model and tool call (`tests/support/agent_line.py`, imported here only when a test asks: the
    suite's import checks see no package loaded by this file): one test for a behaviour both
    lines share."""
    from tests.support.agent_line import installed

    return installed()
