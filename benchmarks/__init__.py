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
