"""Tests of the AgentScope 2.x adapter: they run only where AgentScope 2.x is installed (see
`.ci/run`); on 1.x each module is reported as skipped, with the reason, without being imported
(they import 2.x names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx._line import AGENTSCOPE_VERSION, IS_1X

if IS_1X:
    REASON = (
        f"AgentScope 2.x adapter; AgentScope {AGENTSCOPE_VERSION} is installed "
        "(the 1.x adapter is tested in tests/)"
    )

    class _SkippedModule(pytest.Module):
        def collect(self) -> list[pytest.Item]:
            pytest.skip(REASON, allow_module_level=True)

    def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module:
        return _SkippedModule.from_parent(parent, path=module_path)
