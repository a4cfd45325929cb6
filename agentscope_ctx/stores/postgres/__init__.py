"""The PostgreSQL fleet store: the three seams on one database (DESIGN.md §11).

`PostgresEngine` holds the connections and makes the schema (`_schema`); the dialog store,
the output store and the search index share it. psycopg 3 is imported when the engine first
connects, never at import (install the ``fleet`` extra).
"""

from __future__ import annotations

from ._dialog import PostgresDialogStore
from ._engine import PostgresEngine
from ._outputs import PostgresOutputStore
from ._search import PostgresSearchIndex

__all__ = [
    "PostgresDialogStore",
    "PostgresEngine",
    "PostgresOutputStore",
    "PostgresSearchIndex",
]
