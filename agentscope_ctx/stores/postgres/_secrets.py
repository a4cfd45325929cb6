"""What may be said of the PostgreSQL store: its name, never its connection string.

A DSN, the server's host, the user, the database and the password reach no error, log line,
CLI output or tool result (DESIGN.md §15). The store is named by its schema instead
(`store_name`: "the PostgreSQL store (schema agentscope_ctx)"), and what psycopg or libpq
said of a failure is told by `Secrets.describe`:

- a failure to connect (libpq's messages quote the host, the socket path, the user and the
  database) is told by what kind it is ("connection refused", "password authentication
  failed", "the database does not exist", ...), never in libpq's words;
- any other database error (or psycopg's refusal of a value) by its first line and SQLSTATE,
  with every name the store knows replaced by ``***`` (`Secrets.scrub`);
- any other exception by its type and its text, scrubbed the same way.

The names are those libpq would use: the DSN's options as libpq's parser reads them
(`core.config._dsn.parse_dsn`: percent-encoded, quoted, any spelling), those of its service
(``service=NAME`` or ``PGSERVICE``: the section of ``pg_service.conf``, found and read as
libpq does, `core.config._pg_service`), libpq's environment (``PGHOST``, ``PGUSER``,
``PGDATABASE``, ``PGPASSWORD``, ...), the variable named by ``password_env``, and the OS
user (libpq's default user and database).

A name is replaced where it stands as a whole token, never inside a longer one: no letter,
digit, ``_`` or ``$`` next to it, nor a ``.`` or ``-`` joining it to one (``db-1.internal``
is a host, ``db`` in it is not the database ``db``). With the role ``agent`` and the database
``ctx``, the schema ``adv4_agentscope_ctx`` stays whole: replaced inside it, as
``adv4_***scope_***``, it garbled the message and gave both names away beside the same
name shown whole elsewhere. A name's own edges that are not such characters (a socket path's
``/``) need nothing next to them.

psycopg's own log records (its ``psycopg`` logger: connection attempts, "error ignored in
rollback on <connection host=...>") are scrubbed too, by a filter on that logger that knows
the names of every live store (`Secrets` registers itself).
"""

from __future__ import annotations

import functools
import getpass
import logging
import os
import re
import threading
import weakref

from ...core.config._dsn import is_secret, parse_dsn
from ...core.config._pg_service import service_options

__all__ = ["Secrets", "store_name"]

_NAMED = frozenset(
    {
        "host", "hostaddr", "user", "dbname", "service", "servicefile", "passfile", "options",
        "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslcrldir", "requirepeer",
        "krbsrvname", "application_name", "fallback_application_name", "oauth_issuer",
        "oauth_client_id", "oauth_scope",
    }
)  # fmt: skip
"""The libpq options that name the server, the user or their files (besides the secrets)."""
_ENV = (
    "PGHOST", "PGHOSTADDR", "PGUSER", "PGDATABASE", "PGSERVICE", "PGPASSWORD",
    "PGPASSFILE", "PGSSLCERT", "PGSSLKEY", "PGSSLROOTCERT", "PGAPPNAME",
)  # fmt: skip
_CONNECT_FAILURES = tuple(
    (re.compile(pattern, re.I), said)
    for pattern, said in (
        (r"password authentication failed", "password authentication failed"),
        (r"no password supplied", "no password was supplied"),
        (r"authentication failed|authentication method", "authentication failed"),
        (r"no pg_hba\.conf entry|rejects connection", "the server refuses this client"),
        (r"database \".*\" does not exist", "the database does not exist"),
        (r"role \".*\" does not exist", "the user does not exist"),
        (r"permission denied for database", "permission denied for the database"),
        (r"connection refused", "connection refused"),
        (r"no such file or directory", "no server socket there"),
        (r"resolve host|translate host name|name or service not known", "unknown host"),
        (r"timeout expired|timed out", "the connection timed out"),
        (r"network is unreachable|no route to host", "the network is unreachable"),
        (r"too many connections|connection slots", "too many connections"),
        (r"starting up|shutting down|recovery mode|not yet accepting", "the server is not ready"),
        (r"closed the connection|terminating connection|connection is lost", "connection lost"),
        (r"canceling statement", "the statement was cancelled"),
        (r"ssl|certificate|gssapi|gss", "secure connection negotiation failed"),
        (r"invalid connection option|missing \"=\"|invalid uri|unterminated quoted",
         "the connection string does not parse"),
        (r"connection (failed|is bad)|could not connect|server at|on socket", "cannot connect"),
    )
)  # fmt: skip
"""libpq's failures to connect, told without its words (they quote the names)."""


def store_name(schema: str) -> str:
    """How errors, logs and the CLI name a PostgreSQL store."""
    return f"the PostgreSQL store (schema {schema})"


class Secrets:
    """The names one store must never show (see the module docstring), found on first need.

    Args:
        dsn: The connection string (never shown).
        password_env: Name of the variable holding the password, if any.
    """

    def __init__(self, dsn: str, password_env: str | None = None) -> None:
        self._dsn = dsn
        self._password_env = password_env
        self._names: frozenset[str] | None = None
        _LIVE.add(self)
        _guard_psycopg_logs()

    def __repr__(self) -> str:
        return "Secrets(...)"

    def scrub(self, text: str) -> str:
        """`text` with every name this store knows, as a whole token, replaced by ``***``."""
        pattern = _tokens(self._known())
        return pattern.sub("***", text) if pattern is not None else text

    def describe(self, exc: BaseException) -> str:
        """What may be said of `exc` (see the module docstring)."""
        text = str(exc)
        if type(exc).__module__.split(".")[0] != "psycopg":
            return f"{type(exc).__name__}: {self.scrub(text)}"
        code = getattr(exc, "sqlstate", None)
        kind = type(exc).__name__ + (f", SQLSTATE {code}" if code else "")
        if not code or code[:2] in ("08", "28", "3D", "57"):
            said = next((said for seen, said in _CONNECT_FAILURES if seen.search(text)), None)
            connecting = any(
                c.__name__ in ("OperationalError", "InterfaceError") for c in type(exc).__mro__
            )
            if said is not None or code or connecting:
                return f"{said or 'cannot connect'} ({kind})"
            # else psycopg's own refusal of a value (a NUL in text): its words are its own
        diag = getattr(exc, "diag", None)
        first = getattr(diag, "message_primary", None) or text.strip().split("\n", 1)[0]
        return f"{self.scrub(first)} ({kind})"

    def passwords(self) -> list[str]:
        """The passwords this store may send (in the DSN, `password_env`, ``PGPASSWORD``)."""
        options = self._options()
        found = [v for k, v in options.items() if is_secret(k)]
        for name in (self._password_env, "PGPASSWORD"):
            value = os.environ.get(name) if name else None
            if value:
                found.append(value)
        return found

    # -- internals -----------------------------------------------------------------------

    def _options(self) -> dict[str, str]:
        try:
            return parse_dsn(self._dsn)
        except ValueError:  # unparsable (or no psycopg): every word of it is a name
            words = re.split(r"[\s=&?/:@,;'\"\\]+", self._dsn)
            return {f"word{n}": word for n, word in enumerate(words) if word}

    def _known(self) -> frozenset[str]:
        # The environment is read each time (cheap): the password variable may change.
        if self._names is None:
            names = set()
            options = self._options()
            for key, value in [*options.items(), *service_options(options).items()]:
                if key in _NAMED or key.startswith("word") or is_secret(key):
                    names.add(value)
                    names.update(value.split(","))
            try:
                names.add(getpass.getuser())  # libpq's default user and database
            except Exception:  # no user name known: libpq would have none either
                pass
            self._names = frozenset(names)
        found = set(self._names)
        for variable in (self._password_env, *_ENV):
            env_value = os.environ.get(variable) if variable else None
            if env_value:
                found.add(env_value)
                found.update(env_value.split(","))
        found.discard("")
        return frozenset(found)


_WORD_CHAR = re.compile(r"[\w$]")
"""A character of an identifier (PostgreSQL's: letters of any script, digits, ``_``, ``$``)."""


@functools.lru_cache(maxsize=64)
def _tokens(names: frozenset[str]) -> re.Pattern[str] | None:
    """One pattern finding each of `names` as a whole token (see the module docstring), the
    longest first where several begin at one place; `None` for no names."""
    if not names:
        return None
    parts = []
    for name in sorted(names, key=len, reverse=True):
        before = r"(?<![\w$])(?<![\w$][.-])" if _WORD_CHAR.fullmatch(name[0]) else ""
        after = r"(?![\w$]|[.-][\w$])" if _WORD_CHAR.fullmatch(name[-1]) else ""
        parts.append(f"{before}{re.escape(name)}{after}")
    return re.compile("|".join(parts))


_LIVE: weakref.WeakSet[Secrets] = weakref.WeakSet()
_GUARD = threading.Lock()
_guarded = False


class _PsycopgLogScrubber(logging.Filter):
    """Scrubs psycopg's log records of the names of every live store (message and
    traceback), before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        live = list(_LIVE)
        if not live:
            return True
        try:
            text = record.getMessage()
            trace = None
            if record.exc_info:
                trace = logging.Formatter().formatException(record.exc_info)
            for secrets in live:
                text = secrets.scrub(text)
                trace = secrets.scrub(trace) if trace is not None else None
        except Exception:  # a record we cannot render: drop it rather than show it raw
            return False
        record.msg, record.args = text, ()
        if trace is not None:
            record.exc_info, record.exc_text = None, trace
        return True


def _guard_psycopg_logs() -> None:
    """Install the scrubbing filter on psycopg's loggers (once per process)."""
    global _guarded
    with _GUARD:
        if _guarded:
            return
        scrubber = _PsycopgLogScrubber()
        for name in ("psycopg", "psycopg.pq", "psycopg.debug"):
            logging.getLogger(name).addFilter(scrubber)
        _guarded = True
