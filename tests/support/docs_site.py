"""The documentation's generator (`docs/gen_ref.py`, a MkDocs hook, not a package module),
loaded for the tests that hold the pages to the code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def load_generator() -> ModuleType:
    """`docs/gen_ref.py` as the module ``gen_ref`` (loaded once per process)."""
    loaded = sys.modules.get("gen_ref")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("gen_ref", DOCS / "gen_ref.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_ref"] = module
    spec.loader.exec_module(module)
    return module
