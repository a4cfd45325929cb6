"""Another process holding the search index of a working dir (tests/stores/test_search.py).

    python -m tests.support.index_holder WORKING_DIR write|lock

``write``: opens the live index database and holds a write transaction (as a process that
indexes a large output does); ``lock``: holds ``index/.lock`` (as a process creating or
replacing the database does). Prints READY once it holds it, and holds it until its standard
input is closed. Standard library only, so that it starts at once.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import sys


def main() -> None:
    working_dir, mode = sys.argv[1], sys.argv[2]
    index = os.path.join(working_dir, "index")
    if mode == "write":
        with open(os.path.join(index, "current"), encoding="utf-8") as file:
            name = file.read().strip()
        db = sqlite3.connect(os.path.join(index, name), isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
    elif mode == "lock":
        os.makedirs(index, exist_ok=True)
        fd = os.open(os.path.join(index, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
    else:
        raise SystemExit(f"mode must be write or lock, got {mode!r}")
    print("READY", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
