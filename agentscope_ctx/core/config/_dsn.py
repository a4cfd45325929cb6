"""A PostgreSQL connection string read the way libpq reads it, and the secrets in it.

The check is the parser's, not a pattern's: ``postgresql://agent@db/app?%70assword=x`` is
a password to libpq (it decodes the key), and so is ``user:pw@`` in a URL, ``password=`` in
the key=value form, however quoted or escaped. `parse_dsn` hands the text to libpq's own
parser (``PQconninfoParse``, through psycopg's `conninfo_to_dict`) and `dsn_problem` refuses
every option libpq holds secret:

- ``password``, ``sslpassword``, ``oauth_client_secret`` (libpq marks them secret: shown as
  ``*`` in its option list), the SCRAM keys ``scram_client_key`` and ``scram_server_key``
  (either one logs in as the password does), and any other option whose name says
  ``password`` or ``secret``.

``passfile`` is accepted: it names a file of passwords (as libpq's default ``~/.pgpass``
does); the file is the secret, and it stays out of the config. ``service`` too (a section of
``pg_service.conf``, which may hold a password, out of the config).

psycopg is imported on the first check of a DSN (never when this module is imported: the core
stays cheap to import); without it, or when libpq cannot parse the text, the check fails with
a ``[dsn] ...`` message. No message repeats the DSN or any part of it.
"""

from __future__ import annotations

__all__ = ["SECRET_OPTIONS", "dsn_problem", "is_secret", "parse_dsn"]

SECRET_OPTIONS = frozenset(
    {"password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key"}
)
"""The libpq options that are secrets (besides any whose name says password or secret)."""

_PARSE_ERRORS = (
    ("invalid connection option", "holds an option libpq does not know"),
    ('missing "="', "holds a word without '=' (key=value form)"),
    ("unterminated quoted string", "holds an unterminated quoted value"),
    ("invalid URI", "is not a valid postgresql:// URL"),
    ("invalid percent-encoded token", "holds an invalid percent-encoding"),
    ("forbidden value %00", "holds a percent-encoded NUL"),
    ("invalid integer value", "holds an invalid number"),
)


def parse_dsn(dsn: str) -> dict[str, str]:
    """The options libpq reads in `dsn` (keys and values decoded as libpq decodes them).

    Raises:
        ValueError: ``[dsn] ...``: psycopg is not installed, or libpq cannot parse `dsn`
            (the message says which, never what `dsn` holds).
    """
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ValueError(
            "[dsn] checking a PostgreSQL connection string needs psycopg 3: "
            "pip install 'agentscope-ctx[fleet]'"
        ) from None
    try:
        parsed = conninfo_to_dict(dsn)
    except (Error, ValueError, UnicodeError) as exc:
        message = str(exc)  # libpq's message quotes what it did not understand: never shown
        why = next((said for seen, said in _PARSE_ERRORS if seen in message), "does not parse")
        raise ValueError(
            f"[dsn] {why}; expected a PostgreSQL URL or key=value connection string"
        ) from None
    return {str(k): str(v) for k, v in parsed.items() if v is not None}


def is_secret(option: str) -> bool:
    """Whether the libpq option `option` holds a secret (see the module docstring)."""
    name = option.lower()
    return name in SECRET_OPTIONS or "password" in name or "secret" in name


def dsn_problem(dsn: str) -> str | None:
    """Why `dsn` cannot be a config's DSN (``[dsn] ...``), or `None` when it can: it must
    parse, and hold no secret option (a password goes in the environment)."""
    if "\x00" in dsn or not dsn.strip():
        return "[dsn] expected a PostgreSQL URL or key=value connection string"
    try:
        options = parse_dsn(dsn)
    except ValueError as exc:
        return str(exc)
    secrets = sorted(k for k in options if is_secret(k))
    if secrets:
        return (
            f"[dsn] holds a secret ({', '.join(secrets)}); expected a DSN without one (give "
            "the password in the environment: PGPASSWORD, or the variable named by "
            "password_env; or a passfile)"
        )
    return None
