"""`service_options`: what a ``service=NAME`` connection takes from libpq's connection
service file (``pg_service.conf``), found and read as libpq finds and reads it.

The service is the DSN's ``service`` option, else ``PGSERVICE``. Its section is looked for
first in the user's file (the DSN's ``servicefile`` option of libpq 18, else
``PGSERVICEFILE``, else ``~/.pg_service.conf``), then, when that file is missing or has no
such section, in the system's: ``pg_service.conf`` in ``PGSYSCONFDIR``, else in libpq's
built-in directory, which no API tells; `SYSCONF_DIRS` lists the usual ones (a name read
from a file libpq would not read is one more name to hide, never one shown).

A file is read by libpq's rules (``parseServiceFile``), not ``configparser``'s: each line
without its leading and trailing white space; blank lines and lines starting with ``#``
skipped; ``[NAME]`` (anything after the ``]`` ignored) opens a section and the next ``[``
line ends it; in it, ``key=value`` split at the first ``=``, neither side trimmed further (a
line without ``=`` is libpq's syntax error: skipped here). No continuation lines, no ``:``
separator, no interpolation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SYSCONF_DIRS", "service_files", "service_options", "service_section"]

SYSCONF_DIRS = (
    "/etc/postgresql-common",  # Debian and Ubuntu's libpq, psycopg-binary's
    "/etc/sysconfig/pgsql",  # the PGDG packages of Red Hat's family
    "/usr/local/pgsql/etc",  # a build from source
    "/opt/homebrew/etc",  # Homebrew
    "/usr/local/etc",
)
"""libpq's built-in system configuration directories, when ``PGSYSCONFDIR`` is unset."""


def service_files(
    options: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> list[Path]:
    """The service files libpq would read for the connection `options`, in its order: the
    user's, then the system's (see the module docstring)."""
    user = options.get("servicefile") or environ.get("PGSERVICEFILE")
    if not user:
        home = environ.get("HOME")
        try:
            user = str(Path(home) if home else Path.home()) + "/.pg_service.conf"
        except RuntimeError:  # no home directory known: libpq skips the user's file too
            user = None
    conf_dir = environ.get("PGSYSCONFDIR")
    system = [conf_dir] if conf_dir else list(SYSCONF_DIRS)
    return [Path(p) for p in [user, *(f"{d}/pg_service.conf" for d in system)] if p]


def service_section(text: str, service: str) -> dict[str, str] | None:
    """The options of section `service` in a service file's `text` (libpq's rules), `None`
    when it has no such section."""
    found: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if found is not None:
                break  # the next section: ours has ended
            if line[1:].startswith(service) and line[1 + len(service) : 2 + len(service)] == "]":
                found = {}
            continue
        if found is not None and "=" in line:
            key, value = line.split("=", 1)
            found.setdefault(key, value)  # a key given twice: libpq keeps the first
    return found


def service_options(
    options: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The options the service of the connection `options` gives, read from the first
    service file holding its section (``{}``: no service, or no file holds it)."""
    service = options.get("service") or environ.get("PGSERVICE")
    if not service:
        return {}
    for path in service_files(options, environ):
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:  # missing or unreadable: libpq goes on to the next file too
            continue
        section = service_section(text, service)
        if section is not None:
            return section
    return {}
