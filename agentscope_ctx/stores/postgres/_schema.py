"""The fleet store's tables, in one PostgreSQL schema (``agentscope_ctx`` by default).

Version 8 (an older database is brought up to 8 in place by running the DDL again, every
statement of which is idempotent: version 2's ``memory_docs``, ``outputs.indexed_bytes`` and
``indexed_lines``, and the tenant boundary below; version 3's index of each owner's chunks
newest first; version 4's blocks of an output, its outputs indexed again in the background;
version 5's chunks with a word the server's parser split, made whole; version 6's line of
each dialog record in its owner's day; version 7's policies that let only the owner's role
cross tenants; version 8's agent keys, run once)::

    schema_version(version, applied_at)      one row per version applied
    dialog(seq, msg_id UNIQUE, agent, session, day, record, indexed, saved_at, line)
        one row per message, `seq` from an identity sequence is the order; `record` is the
        dialog record line of `_dialog_record` (JSON text, without its newline); `indexed`:
        the search index has its chunks; `line` (version 6): the record's place (from 1) in
        its owner's day, (agent, session, day) in `seq` order, set by the trigger
        ``dialog_line`` (below)
    dialog_days(day, agent, session, first_seq, last_seq, lines)   PRIMARY KEY (day, agent,
        session): each owner's day, its first and last `seq` and its lines (version 6, kept by
        the trigger ``dialog_days``)
    outputs(id, size, lines, agent, session, saved_at, used_at, indexed, indexed_bytes,
        indexed_lines)
        one row per saved tool output; `used_at` (epoch seconds) is its last use, for
        retention; the search index takes it in pieces: `indexed_bytes` and `indexed_lines`
        say how far it got, `indexed` that it has it whole
    output_chunks(id, n, start, len, newlines_before, data)
        the output's bytes in chunks of `CHUNK` (1 MB; `n` = start // CHUNK), stored
        uncompressed out of line (``STORAGE EXTERNAL``, so a substring reads only its
        pages), with the newlines before each chunk: the line index of `read_file`
    owners(id, agent, session, tool, args, ts)   what is known of each saved output
    chunks(id, kind, source, start_line, line_offset, body, terms, agent, session, role,
        tool, args, ts, byte_start, byte_end, byte_skip, chunk_count)
        the search index: one row per chunk of lines (`_search_text.chunk_lines`) of a
        dialog record (`source` = its seq) or a memory document, one per block of about
        64 KB of an output's chunks (`source` = its id; version 4, `_blocks`: `body` is
        empty, the text read back from `output_chunks` by `byte_start`/`byte_end`); `terms`
        is a tsvector of our own tokens (`_search_text.tokens`, CJK one character each),
        with their positions (a block's: the chunks of the block each is in, 256 chunks to a
        block at most; a block indexed before these: none), GIN-indexed; ``(agent, session, id)``
        indexed too (version 3), so that a tenant's search finds its own chunks by that
        index (and the GIN one); ``body`` and ``terms`` lz4-compressed where the server has
        lz4 (version 3)
    steps(id, session, agent, record, saved_at)   the session viewer's record of each
        pipeline run (`_steps`)
    memory_docs(agent, name, body, version, updated_at, indexed)   PRIMARY KEY (agent, name)
        long-term memory, one per agent (`_memory`): MEMORY.md, the daily notes and the
        consolidation's record, each a whole text; `version` counts its writes (0: not
        written yet); `indexed`: the search index has its chunks (`_memory_index`)

Version 2 (the tenant boundary, DESIGN.md §15, docs/tenants.md): ``agent`` and ``session`` of
``dialog`` and ``outputs`` are ``NOT NULL`` (``""`` for none; version 1's NULLs become
``""``); the dialog is idempotent by (agent, session, msg_id) instead of msg_id alone (two
agents given one message object each keep their copy); every table but ``schema_version`` has
row-level security, forced on the table owner too: a row is seen (and written) only by a
transaction whose ``agentscope_ctx.scope`` / ``.agent`` / ``.session`` settings
(`_tenant.bind`) let it. ``output_chunks`` follows its ``outputs`` row. A version 1 schema is
migrated in place by the same DDL (every statement is idempotent).

Version 7: a transaction sees every tenant's rows (scope ``all`` or ``shared``) only when its
role has the privileges of the schema's owner (`CROSSES`), so that a role granted only
``SELECT``/``INSERT``/``UPDATE``/``DELETE`` on tables a migration role owns cannot cross by
setting ``agentscope_ctx.scope`` itself (nor turn the policies off: that takes the owner).

Version 8: the agent keys of version 2 (`core._tenant.KEY_VERSION`: the name of an agent
without a user escaped, so that it never reads as ``user/agent``). Each key of an older
database is made its owner's key of version 2 (`core._tenant.upgraded_key`, `_KEYS`) in every
table that names an owner, once, in the migration's transaction.

Created on first use by `ensure` under a transaction-scoped advisory lock, so that several
workers starting at once make it once (a worker finding the current version runs no DDL);
an existing schema of a newer version is refused.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["CHUNK", "CROSSES", "OWNER_LOCK", "SCHEMA_VERSION", "TENANT_POLICY", "ensure"]

logger = logging.getLogger("agentscope_ctx")

SCHEMA_VERSION = 8
CHUNK = 1 << 20
"""Bytes per output chunk."""
_LOCK = 0x61637478  # "actx": the advisory lock key of schema creation
LINE_LOCK = 0x6C696E65  # "line": with the owner's hash, the lock of its records' lines
OWNER_LOCK = f"pg_advisory_xact_lock({LINE_LOCK}, hashtext({{a}} || chr(31) || {{s}}))"
"""The lock an append holds while it numbers the lines of owner ({a}, {s}) (`_LINES`)."""

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.schema_version (
    version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS {s}.dialog (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id text NOT NULL UNIQUE,
    agent text, session text,
    day date NOT NULL,
    record text NOT NULL,
    indexed boolean NOT NULL DEFAULT false,
    saved_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS dialog_unindexed ON {s}.dialog (seq) WHERE NOT indexed;
CREATE INDEX IF NOT EXISTS dialog_by_day ON {s}.dialog (day, seq);
CREATE INDEX IF NOT EXISTS dialog_by_session ON {s}.dialog (session, seq);
CREATE TABLE IF NOT EXISTS {s}.outputs (
    id text PRIMARY KEY,
    size bigint NOT NULL, lines bigint NOT NULL,
    agent text, session text,
    saved_at timestamptz NOT NULL DEFAULT now(),
    used_at double precision NOT NULL,
    indexed boolean NOT NULL DEFAULT false);
ALTER TABLE {s}.outputs ADD COLUMN IF NOT EXISTS indexed_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.outputs ADD COLUMN IF NOT EXISTS indexed_lines bigint NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS outputs_unindexed ON {s}.outputs (saved_at) WHERE NOT indexed;
CREATE INDEX IF NOT EXISTS outputs_by_use ON {s}.outputs (used_at);
CREATE TABLE IF NOT EXISTS {s}.output_chunks (
    id text NOT NULL REFERENCES {s}.outputs (id) ON DELETE CASCADE,
    n integer NOT NULL, start bigint NOT NULL, len integer NOT NULL,
    newlines_before bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (id, n));
ALTER TABLE {s}.output_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS output_chunks_lines ON {s}.output_chunks (id, newlines_before);
CREATE TABLE IF NOT EXISTS {s}.owners (
    id text PRIMARY KEY, agent text, session text, tool text, args text, ts text);
CREATE TABLE IF NOT EXISTS {s}.chunks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL, source text NOT NULL,
    start_line integer NOT NULL, line_offset integer NOT NULL,
    body text NOT NULL, terms tsvector NOT NULL,
    agent text, session text, role text, tool text, args text, ts text);
CREATE INDEX IF NOT EXISTS chunks_terms ON {s}.chunks USING gin (terms);
CREATE INDEX IF NOT EXISTS chunks_by_source ON {s}.chunks (source);
"""
CROSSES = (
    "(SELECT current_setting('agentscope_ctx.scope', true) IN ('all', 'shared') AND pg_has_role("
    "(SELECT n.nspowner FROM pg_catalog.pg_namespace AS n WHERE n.oid = '{s}'::regnamespace), "
    "'USAGE'))"
)
"""Whether the transaction sees every tenant's rows (version 7; ``{s}``: the schema): its
scope says ``all`` or ``shared`` *and* its role has the privileges of the schema's owner (the
owner itself, or a role that inherits from it). A setting any role can make is not trusted
alone: a workers' role that owns nothing (docs/tenants.md, "A migration role and a workers'
role") sets ``all`` and sees no row of anyone's. A sub-select: evaluated once per query."""
_VISIBLE = (
    "(" + CROSSES.replace("{s}", "{{s}}") + " OR "
    "(current_setting('agentscope_ctx.scope', true) IN ('session', 'agent') "
    "AND {a}agent = current_setting('agentscope_ctx.agent', true) "
    "AND (current_setting('agentscope_ctx.scope', true) = 'agent' "
    "OR {a}session = current_setting('agentscope_ctx.session', true))))"
)
"""Whether a row owned by ({a}agent, {a}session) is in the transaction's tenant scope."""
TENANT_POLICY = _VISIBLE.format(a="")
"""`_VISIBLE` of a table's own ``agent`` and ``session`` (``{s}``: the schema)."""
_AGENT_VISIBLE = (
    "(" + CROSSES + " OR "
    "(current_setting('agentscope_ctx.scope', true) IN ('session', 'agent') "
    "AND agent = current_setting('agentscope_ctx.agent', true)))"
)
"""Whether a long-term memory row (one per agent, shared by its sessions) is in scope."""
_TENANTS = """
CREATE TABLE IF NOT EXISTS {s}.memory_docs (
    agent text NOT NULL, name text NOT NULL,
    body text NOT NULL, version bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    indexed boolean NOT NULL DEFAULT false,
    PRIMARY KEY (agent, name));
CREATE INDEX IF NOT EXISTS memory_unindexed ON {s}.memory_docs (agent) WHERE NOT indexed;
CREATE TABLE IF NOT EXISTS {s}.steps (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session text NOT NULL, agent text NOT NULL, record text NOT NULL,
    saved_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS steps_by_session ON {s}.steps (session, agent, id);

UPDATE {s}.dialog SET agent = coalesce(agent, ''), session = coalesce(session, '')
    WHERE agent IS NULL OR session IS NULL;
UPDATE {s}.outputs SET agent = coalesce(agent, ''), session = coalesce(session, '')
    WHERE agent IS NULL OR session IS NULL;
ALTER TABLE {s}.dialog ALTER COLUMN agent SET DEFAULT '', ALTER COLUMN agent SET NOT NULL,
    ALTER COLUMN session SET DEFAULT '', ALTER COLUMN session SET NOT NULL;
ALTER TABLE {s}.outputs ALTER COLUMN agent SET DEFAULT '', ALTER COLUMN agent SET NOT NULL,
    ALTER COLUMN session SET DEFAULT '', ALTER COLUMN session SET NOT NULL;
ALTER TABLE {s}.dialog DROP CONSTRAINT IF EXISTS dialog_msg_id_key;
CREATE UNIQUE INDEX IF NOT EXISTS dialog_by_owner_msg ON {s}.dialog (agent, session, msg_id);
CREATE INDEX IF NOT EXISTS dialog_by_owner_day ON {s}.dialog (agent, day, session, seq);
CREATE INDEX IF NOT EXISTS outputs_by_owner ON {s}.outputs (agent, session);
""" + "".join(
    f"""
ALTER TABLE {{s}}.{table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {{s}}.{table} FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant ON {{s}}.{table};
CREATE POLICY tenant ON {{s}}.{table} USING {check} WITH CHECK {check};
"""
    for table, check in (
        ("dialog", _VISIBLE.format(a="")),
        ("outputs", _VISIBLE.format(a="")),
        ("owners", _VISIBLE.format(a="")),
        ("chunks", _VISIBLE.format(a="")),
        ("memory_docs", _AGENT_VISIBLE),
        ("steps", _VISIBLE.format(a="")),
        (
            "output_chunks",
            "(EXISTS (SELECT 1 FROM {s}.outputs AS o WHERE o.id = output_chunks.id))",
        ),
    )
)
"""Version 2: the owners made whole, the dialog keyed by owner, row-level security."""
_RETENTION_POLICY = (
    """
DO $$ BEGIN
    IF to_regclass('{s}.tombstones') IS NOT NULL THEN  -- retention's (`_tombstones`), if made
        DROP POLICY IF EXISTS tenant ON {s}.tombstones;
        CREATE POLICY tenant ON {s}.tombstones USING """
    + TENANT_POLICY
    + " WITH CHECK "
    + TENANT_POLICY
    + """;
    END IF;
END $$;
"""
)
"""Version 7: retention's tombstones (made when first needed) under the policy of version 7."""
_NEWEST = """
DROP INDEX IF EXISTS {s}.chunks_by_owner;
CREATE INDEX IF NOT EXISTS chunks_by_owner_id ON {s}.chunks (agent, session, id);
DO $$ BEGIN
    ALTER TABLE {s}.chunks ALTER COLUMN terms SET COMPRESSION lz4,
        ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN NULL;  -- a server built without lz4: pglz
END $$;
"""
"""Version 3: a tenant's chunks newest first (its search stops after the newest matches),
and the index's text and ``tsvector`` compressed with lz4 (a third smaller than the default
pglz leaves them, which gives up on a ``tsvector``; rows written from then on)."""


_BLOCKS = """
ALTER TABLE {s}.chunks ADD COLUMN IF NOT EXISTS byte_start bigint,
    ADD COLUMN IF NOT EXISTS byte_end bigint, ADD COLUMN IF NOT EXISTS byte_skip integer,
    ADD COLUMN IF NOT EXISTS chunk_count integer;
UPDATE {s}.outputs SET indexed = false, indexed_bytes = 0, indexed_lines = 0
    WHERE indexed OR indexed_bytes > 0;
"""
"""Version 4: an output indexed a row per block (`_blocks`): where its text is in the output
instead of the text, its tokens without positions. Every output is indexed again, in the
background, in pieces (`_indexer`): the first piece of each drops its rows of a chunk each,
which are searched as before until then."""


_WHOLE_WORDS = r"""
UPDATE {s}.chunks AS c SET terms = (
    SELECT string_agg(quote_literal(w.word) || ':' || w.n, ' ')::tsvector
    FROM (SELECT t.m[1] AS word, t.n, row_number() OVER (PARTITION BY t.m[1] ORDER BY t.n) AS k
          FROM regexp_matches(lower(c.body), '[a-z0-9]+', 'g') WITH ORDINALITY AS t(m, n)) AS w
    WHERE w.k <= 255)
WHERE c.byte_start IS NULL AND c.body !~ '[^\x01-\x7f]'
    AND c.body !~ '[a-zA-Z0-9]{{200}}[a-zA-Z0-9]{{57}}'
    AND lower(c.body) ~ '(^|[^a-z0-9])[0-9]+e[0-9]+[a-z]';
"""
"""Version 5: the chunks whose words PostgreSQL's parser split (a number in exponent form, then
letters: ``0e0a`` as ``0e0`` and ``a``; `_rows.chunk_row` sends those as our own literal now)
get their words whole, as `_search_sql.tsvector_text` writes them: an ASCII chunk's tokens
are its runs of letters and digits, lower-cased, each with its positions (255 at most); a
chunk with a run over `MAX_LEXEME` (257 in a row: the server's regular expressions count to 255)
was written as our literal, and is left."""


_DAYS_UPSERT = """
INSERT INTO {s}.dialog_days AS g (day, agent, session, first_seq, last_seq, lines)
    SELECT day, agent, session, min(seq), max(seq), max(line) FROM {rows}
    GROUP BY day, agent, session
ON CONFLICT (day, agent, session) DO UPDATE SET first_seq = least(g.first_seq, excluded.first_seq),
    last_seq = greatest(g.last_seq, excluded.last_seq), lines = greatest(g.lines, excluded.lines)
"""
"""Each owner's day of `rows` (the dialog, or the rows an ``INSERT`` added) in ``dialog_days``."""
_LINES = (
    """
ALTER TABLE {s}.dialog ADD COLUMN IF NOT EXISTS line integer;
UPDATE {s}.dialog AS d SET line = n.line FROM (
    SELECT seq, row_number() OVER (PARTITION BY agent, session, day ORDER BY seq) AS line
    FROM {s}.dialog) AS n
WHERE d.seq = n.seq AND d.line IS DISTINCT FROM n.line;
ALTER TABLE {s}.dialog ALTER COLUMN line SET NOT NULL;
CREATE TABLE IF NOT EXISTS {s}.dialog_days (
    day date NOT NULL, agent text NOT NULL, session text NOT NULL,
    first_seq bigint NOT NULL, last_seq bigint NOT NULL, lines integer NOT NULL,
    PRIMARY KEY (day, agent, session));
"""
    + _DAYS_UPSERT.replace("{rows}", "{s}.dialog")
    + """;
ALTER TABLE {s}.dialog_days ENABLE ROW LEVEL SECURITY;
ALTER TABLE {s}.dialog_days FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS tenant ON {s}.dialog_days;
CREATE POLICY tenant ON {s}.dialog_days USING """
    + _VISIBLE.format(a="")
    + " WITH CHECK "
    + _VISIBLE.format(a="")
    + """;
CREATE OR REPLACE FUNCTION {s}.dialog_line() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM """
    + OWNER_LOCK.format(a="NEW.agent", s="NEW.session")
    + """;
    NEW.line := greatest(
        (SELECT d.line FROM {s}.dialog AS d WHERE d.agent = NEW.agent AND d.day = NEW.day
         AND d.session = NEW.session ORDER BY d.seq DESC LIMIT 1),
        (SELECT g.lines FROM {s}.dialog_days AS g WHERE g.day = NEW.day
         AND g.agent = NEW.agent AND g.session = NEW.session), 0) + 1;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION {s}.dialog_days() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
"""
    + _DAYS_UPSERT.replace("{rows}", "added")
    + """;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS dialog_line ON {s}.dialog;
CREATE TRIGGER dialog_line BEFORE INSERT ON {s}.dialog
    FOR EACH ROW EXECUTE FUNCTION {s}.dialog_line();
DROP TRIGGER IF EXISTS dialog_days ON {s}.dialog;
CREATE TRIGGER dialog_days AFTER INSERT ON {s}.dialog REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION {s}.dialog_days();
"""
)
"""Version 6: each dialog record's line in its owner's day, and each owner's days, so that a
search places a hit in its day without counting the day's rows (`_search_sql.day_rows`).

- ``dialog.line``: existing rows are numbered once, in `seq` order; from then on the trigger
  ``dialog_line`` numbers each new row after the last of its owner's day (the line of its
  newest row, or the day's count in ``dialog_days`` where that is more), under the owner's
  advisory lock (`OWNER_LOCK`), which an append takes before its ``INSERT`` (`_dialog`): the
  rows of one owner take their `seq` and their line in one order, whichever worker appends
  them. A row skipped by ``ON CONFLICT DO NOTHING`` takes no line.
- ``dialog_days(day, agent, session, first_seq, last_seq, lines)``: each owner's day, its
  first and last `seq` and its lines, kept by the trigger ``dialog_days`` (once per
  ``INSERT``, from the rows it added).

The lines of an owner's day are 1 to n in `seq` order, so the line of a record in a day read
by several owners (an agent's sessions, every tenant) is the sum over the day's owners in the
reader's scope of their rows up to it: all of an owner's day that ended before it, none of one
that began after it, and the line of its last row up to it otherwise. A worker of an older
version still running gets its rows numbered by the triggers too (its appends do not take the
lock first: two of them appending to one session at once may number two rows out of `seq`
order; no line is given twice)."""


_OWNED = ("dialog", "dialog_days", "outputs", "owners", "chunks", "memory_docs", "tombstones")
"""The tables whose ``agent`` is an agent key (``steps`` names the agent, ``audit`` the
target as given)."""
_KEYS = """
DO $$
DECLARE
    old text;
    new text;
    t text;
BEGIN
    FOR old IN SELECT k.agent FROM ({keys}) AS k(agent)  -- (UNION: each once)
        WHERE strpos(k.agent, '%') > 0 AND k.agent !~ '^([^%/]|%25|%2F)*/'
        ORDER BY length(k.agent) DESC, k.agent
    LOOP
        new := replace(replace(old, '%', '%25'), '/', '%2F');
        FOREACH t IN ARRAY ARRAY[{tables}] LOOP
            EXECUTE format('UPDATE {s}.%I SET agent = $2 WHERE agent = $1', t) USING old, new;
        END LOOP;
    END LOOP;
END $$;
"""
"""Version 8: every agent key of version 1 that is not ``user/agent`` (a ``/``, before the
first one a user part as `agent_key` escaped it) and holds a ``%`` (no other changes) is
escaped, in each table of `_OWNED` (`core._tenant.upgraded_key`). Longest first: a key's new
form is longer than it, so no key is moved onto one still to move (a unique key of two
owners' rows never meets). A dialog row's ``record`` keeps the ``"agent"`` it was written
with: the column is the owner."""


def _keys_sql(conn: Any, schema: str) -> str:
    """`_KEYS` for the tables of `_OWNED` the database has (``tombstones`` is made when
    retention first needs it)."""
    tables = [
        t
        for t in _OWNED
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.{t}",)).fetchone()[0] is not None
    ]
    keys = " UNION ".join(
        f"SELECT agent FROM {schema}.{t} WHERE strpos(agent, '%') > 0" for t in tables
    )
    names = ", ".join(f"'{t}'" for t in tables)
    return _KEYS.replace("{keys}", keys).replace("{tables}", names).replace("{s}", schema)


def _version(conn: Any, schema: str) -> int | None:
    """The schema version the database holds (`None`: no tables yet)."""
    row = conn.execute("SELECT to_regclass(%s)", (f"{schema}.schema_version",)).fetchone()
    if row is None or row[0] is None:
        return None
    row = conn.execute(f"SELECT max(version) FROM {schema}.schema_version").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def ensure(conn: Any, schema: str) -> None:
    """Create the tables when missing (idempotent, safe when many workers start at once).

    A database that already holds this version is only read (its DDL would lock tables other
    workers are writing); otherwise the tables are made under the advisory lock, and the
    version row is written last, in the same transaction.

    Raises:
        RuntimeError: the database holds a newer schema version than this package knows.
    """
    for locked in (False, True):
        with conn.transaction():
            if locked:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            version = _version(conn, schema)
            if version is not None and version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"the store's schema is version {version}; this agentscope_ctx knows "
                    f"{SCHEMA_VERSION} (upgrade agentscope_ctx)"
                )
            if version == SCHEMA_VERSION:
                _tell_if_confined(conn, schema)
                return
            if locked:
                conn.execute(
                    "SELECT set_config('agentscope_ctx.scope', 'all', true)"
                )  # the migration's own statements see every row
                conn.execute(_DDL.format(s=schema))
                conn.execute(_TENANTS.format(s=schema))
                conn.execute(_NEWEST.format(s=schema))
                if version is None or version < 4:  # (its outputs indexed again: once)
                    conn.execute(_BLOCKS.format(s=schema))
                conn.execute(_WHOLE_WORDS.format(s=schema))
                conn.execute(_LINES.format(s=schema))
                conn.execute(_RETENTION_POLICY.format(s=schema))
                if version is not None and version < 8:  # (once: keys already of version 2
                    conn.execute(_keys_sql(conn, schema))  # would be escaped again)
                conn.execute(
                    f"INSERT INTO {schema}.schema_version (version) VALUES (%s) "
                    "ON CONFLICT DO NOTHING",
                    (SCHEMA_VERSION,),
                )


def _tell_if_confined(conn: Any, schema: str) -> None:
    """Log once per engine when the role cannot see every tenant's rows (it lacks the schema
    owner's privileges, `CROSSES`): retention, the operator's tools and the index's catch-up
    of the tenants the worker does not serve, which read every tenant's rows, then see none,
    and must run as the owner's role (the index catches up the worker's own tenants' rows as
    theirs: `_search`)."""
    row = conn.execute(
        "SELECT pg_has_role(nspowner, 'USAGE') FROM pg_catalog.pg_namespace "
        "WHERE oid = %s::regnamespace",
        (schema,),
    ).fetchone()
    if row is not None and not row[0]:
        logger.warning(
            "agentscope_ctx: this role does not have the privileges of the owner of the "
            "store's schema %s: its own tenants' rows are read, written and indexed as ever, "
            "but retention, the operator's tools and the search index's catch-up of other "
            "tenants' rows, which work on every tenant's rows, see none here; run them as the "
            "schema's owner (docs/tenants.md, 'A migration role and a workers' role')",
            schema,
        )
