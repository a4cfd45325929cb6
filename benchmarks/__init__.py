"""The benchmarks, grouped by what they measure; one entry point, ``python -m benchmarks NAME``.

- `pipeline/`: the core's step and its parts (tokens, truncation, pins, the read_file snapshot,
  tracing), the 2.x adapter's step (`steady2`) and what survives compactions (`probes`);
- `cost/`: what holding the budget costs with a prompt cache (scripted sessions, the scripted
  models per line, the meter, the checks, the report), 1.x's built-in compression beside it
  (`baseline`) and the compaction request's cost;
- `store/`: the dialog stores (local files against PostgreSQL), recall's search, search engine
  candidates and long-term memory;
- `startup/`: importing the package and the quick CLI commands.

`compare.py` prints the two AgentScope lines' results side by side.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

_OLD_NAMES = {
    "benchmarks.bench_pipeline": "benchmarks.pipeline.step",
    "benchmarks.bench_store": "benchmarks.store.stores",
    "benchmarks.cost_models2": "benchmarks.cost.models2",
}
"""Flat names some benches still import by (`store.engines`, `pipeline.steady2`), until
their imports follow the grouping; each is the grouped module itself, not a second copy."""


class _OldName(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _OLD_NAMES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(_OLD_NAMES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The grouped module ran when it was imported."""


if not any(isinstance(finder, _OldName) for finder in sys.meta_path):
    sys.meta_path.append(_OldName())
