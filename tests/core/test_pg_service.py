"""A ``service=NAME`` connection's options, read from ``pg_service.conf`` by libpq's rules
(`core.config._pg_service`; issue 46 item 3): which files, in which order, and how a file is
read. `tests/fleet/test_pg_secrets.py` connects through such a file to a real server."""

from __future__ import annotations

from pathlib import Path

from agentscope_ctx.core.config._pg_service import (
    SYSCONF_DIRS,
    service_files,
    service_options,
    service_section,
)

FILE = """\
# services of this host
[svcx]
host=wrong-prefix

   [svc]   trailing words after the bracket are ignored
host=db.internal
  user=agent
dbname = ctx
password=p=w#1
not a pair
host=second-host
# a comment inside the section
[other]
user=someone-else
"""


def test_a_section_is_read_by_libpqs_rules() -> None:
    """Lines stripped, comments and blank lines skipped, ``[NAME]`` matched exactly (not
    ``[NAMEx]``), a pair split at its first ``=`` and not trimmed further, a line without
    ``=`` skipped, the first of a key kept, the section ended by the next one."""
    assert service_section(FILE, "svc") == {
        "host": "db.internal",
        "user": "agent",
        "dbname ": " ctx",
        "password": "p=w#1",
    }
    assert service_section(FILE, "svcx") == {"host": "wrong-prefix"}
    assert service_section(FILE, "sv") is None and service_section("", "svc") is None


def test_the_files_are_libpqs_in_its_order(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert service_files({}, env) == [
        tmp_path / ".pg_service.conf",
        *(Path(d) / "pg_service.conf" for d in SYSCONF_DIRS),
    ]
    env |= {"PGSERVICEFILE": "/srv/a.conf", "PGSYSCONFDIR": "/srv/etc"}
    assert service_files({}, env) == [Path("/srv/a.conf"), Path("/srv/etc/pg_service.conf")]
    assert service_files({"servicefile": "/srv/b.conf"}, env)[0] == Path("/srv/b.conf")


def test_the_users_file_first_then_the_systems(tmp_path: Path) -> None:
    """The section of the user's file, else the system's; the service from the DSN, else
    ``PGSERVICE``; nothing without a service or a section."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "pg_service.conf").write_text("[svc]\nhost=system\n[sys]\nuser=u\n")
    (tmp_path / "user.conf").write_text(FILE)
    env = {"PGSERVICEFILE": str(tmp_path / "user.conf"), "PGSYSCONFDIR": str(tmp_path / "etc")}
    assert service_options({"service": "svc"}, env)["host"] == "db.internal"
    assert service_options({"service": "sys"}, env) == {"user": "u"}
    assert service_options({}, {**env, "PGSERVICE": "sys"}) == {"user": "u"}
    assert service_options({}, env) == {} and service_options({"service": "none"}, env) == {}
    missing = {**env, "PGSERVICEFILE": str(tmp_path / "missing.conf")}
    assert service_options({"service": "svc"}, missing) == {"host": "system"}
