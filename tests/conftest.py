"""Suite-wide settings.

Hypothesis runs derandomized under ``CI=true`` (profile ``ci``): a CI run never passes or fails
by chance. A case a fuzzer finds locally is a bug to fix, pinned with ``@example``.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile("ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev")
