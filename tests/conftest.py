"""Suite-wide settings.

Hypothesis runs derandomized under ``CI=true`` (profile ``ci``): a CI run never passes or fails
by chance. A case a fuzzer finds locally is a bug to fix, pinned with ``@example``. No profile
has a deadline: a per-example time limit is a wall-clock assertion, and on a loaded 2-core
machine it failed a chart test by chance (254 ms against 200 ms); speed is measured in
`benchmarks/`.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("dev", print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev")
