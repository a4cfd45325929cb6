"""Tests of the AgentScope 2.x adapter: they run only where AgentScope 2.x is installed
(see `.ci/run`); a 1.x run does not collect them."""

from __future__ import annotations

import agentscope

if str(agentscope.__version__).startswith("1."):
    collect_ignore_glob = ["test_*.py", "fakes.py"]
