"""Secrets found by the parser, never shown (issue 28 item 2; DESIGN.md §15).

A DSN's password is refused however it is spelled (the config reads the DSN with libpq's own
parser), and no DSN, host, user, database name or password reaches an error, a log line (its
traceback included), the CLI's output or what `read_file` and `search_history` answer the
model, whatever the connection string's spelling: against an unreachable server and a real
one that refuses the login.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.core._errors import ConfigError, ContextError
from agentscope_ctx.core._failures import FailureLog
from agentscope_ctx.core.config._config import ContextConfig, RecallConfig, ToolResultConfig
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.recall._recall import Recall
from agentscope_ctx.stores._tool_results import ToolResultPolicy
from agentscope_ctx.stores.factory import open_backend
from agentscope_ctx.stores.postgres._secrets import Secrets
from tests.fleet.pg_config import PgStore, config_file
from tests.fleet.postgres_server import PASSWORD, PORT, PostgresServer
from tests.support.lines import Msg, text_of

ENV = "AGENTSCOPE_CTX_TEST_PGPASSWORD"
_SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]

# Distinctive names (a marker, then letters and digits of any script), so that finding one in
# a text can only mean it leaked.
_WORD = st.text(st.characters(categories=("L", "Nd")), min_size=3, max_size=8)
_ASCII = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=3, max_size=8)
_HOSTS = _ASCII.map(lambda s: f"zqhost{s}")
_USERS = _WORD.map(lambda s: f"zquser{s}")
_DBS = _WORD.map(lambda s: f"zqdb{s}")
_PASSWORDS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
).map(lambda s: f"zqpw{s}")


@st.composite
def _percent(draw: st.DrawFn, text: str) -> str:
    """`text` percent-encoded as a URL part, with some safe characters encoded too and the
    hex digits in either case (libpq decodes them all)."""
    out = []
    for char in text:
        encoded = quote(char, safe="")
        if encoded == char and draw(st.booleans()):
            encoded = "".join(f"%{b:02X}" for b in char.encode())
        hex_lower = encoded.startswith("%") and draw(st.booleans())
        out.append(encoded.lower() if hex_lower else encoded)
    return "".join(out)


def _kv_value(draw: st.DrawFn, value: str) -> str:
    """`value` as a key=value DSN writes it: bare when it can be, else quoted and escaped."""
    if value.isalnum() and value.isascii() and not draw(st.booleans()):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def _dsns(
    draw: st.DrawFn,
    host: str,
    user: str,
    db: str,
    *,
    password: str | None = None,
    hostaddr: str | None = None,
    port: int = 1,
) -> str:
    """One spelling of a DSN naming `host`, `user`, `db` (and `password`): the key=value form
    in any order and spacing, or a URL with percent-encodings and its parts in the path or
    the query (a password in the user info, or under a percent-encoded key)."""
    if draw(st.booleans()):
        pairs = [("host", host), ("port", str(port)), ("user", user), ("dbname", db)]
        if hostaddr:
            pairs.append(("hostaddr", hostaddr))
        if password is not None:
            pairs.append((draw(st.sampled_from(["password", "sslpassword"])), password))
        pairs = draw(st.permutations(pairs))
        eq = draw(st.sampled_from(["=", " = ", "= ", " ="]))
        return " ".join(f"{k}{eq}{_kv_value(draw, v)}" for k, v in pairs)
    scheme = draw(st.sampled_from(["postgresql", "postgres"]))
    query: list[str] = []
    userinfo = ""
    if draw(st.booleans()):
        userinfo = draw(_percent(user))
        if password is not None and draw(st.booleans()):
            userinfo += ":" + draw(_percent(password))
            password = None
        userinfo += "@"
    else:
        query.append("user=" + draw(_percent(user)))
    if host.startswith("/"):  # a socket directory: in the query, or percent-encoded
        netloc = quote(host, safe="") if draw(st.booleans()) else ""
        if not netloc:
            query.append("host=" + draw(_percent(host)))
    else:
        netloc = host
    netloc += f":{port}"
    if draw(st.booleans()):
        path = "/" + draw(_percent(db))
    else:
        path = "/"
        query.append("dbname=" + draw(_percent(db)))
    if hostaddr:
        query.append(f"hostaddr={hostaddr}")
    if password is not None:
        key = draw(_percent(draw(st.sampled_from(["password", "sslpassword"]))))
        query.append(f"{key}={draw(_percent(password))}")
    query = draw(st.permutations(query))
    return f"{scheme}://{userinfo}{netloc}{path}" + ("?" + "&".join(query) if query else "")


def _leaks(texts: list[str], *secrets: str) -> list[tuple[str, str]]:
    return [(s, t) for t in texts for s in secrets if s and s in t]


# -- the config check --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://agent@db/app?%70assword=zqpw1",  # the issue's spellings
        "postgresql://agent@db/app?pass%77ord=zqpw1",
        "postgresql://ag%65nt:zq%70w1@db/app",
        "host=db user=agent password = 'zq\\'pw1'",
        "postgres://db/app?user=agent&sslpassword=zqpw1",
    ],
)
def test_the_issues_spellings_of_a_password_are_refused(dsn: str) -> None:
    with pytest.raises(ConfigError, match="holds a secret") as info:
        ContextConfig(store={"kind": "postgres", "dsn": dsn})
    assert info.value.field == "store.dsn" and "zqpw1" not in str(info.value)


@given(data=st.data(), host=_HOSTS, user=_USERS, db=_DBS, password=_PASSWORDS)
def test_a_password_is_refused_however_it_is_spelled(
    data: st.DataObject, host: str, user: str, db: str, password: str
) -> None:
    dsn = data.draw(_dsns(host, user, db, password=password), label="dsn")
    with pytest.raises(ConfigError) as info:
        ContextConfig(store={"kind": "postgres", "dsn": dsn})
    assert info.value.field == "store.dsn" and "holds a secret" in str(info.value)
    shown = [str(info.value), repr(info.value)]
    assert not _leaks(shown, password, host, user, db), (dsn, shown)
    without = data.draw(_dsns(host, user, db), label="without")  # is accepted
    assert ContextConfig(store={"kind": "postgres", "dsn": without}).store.dsn == without


@pytest.mark.parametrize(
    ("dsn", "said"),
    [
        ("host=db nonsense zqsecret", "without '='"),
        ("host=db zqopt=zqsecret", "does not know"),
        ("postgresql://db/app?zqopt=zqsecret", "valid postgresql:// URL"),
        ("postgresql://zq%zzsecret@db/app", "percent-encoding"),
        ("host='db zqsecret", "unterminated"),
    ],
)
def test_a_dsn_libpq_cannot_parse_is_refused_without_repeating_it(dsn: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as info:
        ContextConfig(store={"kind": "postgres", "dsn": dsn})
    assert info.value.field == "store.dsn" and "zqsecret" not in str(info.value)


def test_a_passfile_is_accepted_and_other_secret_options_are_refused() -> None:
    assert ContextConfig(store={"kind": "postgres", "dsn": "host=db passfile=/etc/pw"})
    for dsn in ("host=db sslpassword=zqk", "postgresql://db/app?oauth_client_secret=zqk"):
        with pytest.raises(ConfigError, match="secret") as info:
            ContextConfig(store={"kind": "postgres", "dsn": dsn})
        assert "zqk" not in str(info.value)


# -- the store: errors, logs, CLI and tool results ---------------------------------------------


def _shown_by_a_store_that_fails(
    tmp_path: Path,
    dsn: str,
    schema: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> list[str]:
    """Everything a failing store shows: its errors (with their tracebacks), the log (with
    the tracebacks logged), the CLI's output, and the tool results the model is sent."""
    caplog.clear()
    capsys.readouterr()
    store = {
        "kind": "postgres", "dsn": dsn, "password_env": ENV, "schema_name": schema,
        "retry_seconds": 0, "connect_timeout_seconds": 2,
    }  # fmt: skip
    config = ContextConfig(working_dir=tmp_path / "w", store=store)
    backend = open_backend(config, failures=FailureLog())
    shown: list[str] = []

    def failing(call: object) -> None:
        with pytest.raises(ContextError) as info:
            call()  # type: ignore[operator]
        shown.extend([str(info.value), "".join(traceback.format_exception(info.value))])

    msg = Msg("user", "hello", "user")
    failing(lambda: asyncio.run(backend.dialog({"agent": "a"}).append([msg])))
    failing(lambda: backend.outputs("a").save("an output"))
    failing(lambda: backend.search.search("hello"))
    backend.search.dialog_appended()  # logged, never raised
    reader = FileReader([tmp_path], ToolResultPolicy(ToolResultConfig()), sources=backend.source)
    for ref in ("pg-dialog:2026-12-02", "pg-output:" + "0" * 32):
        shown.append(text_of(asyncio.run(reader.read_file(ref))))
    recall = Recall(backend.search, RecallConfig(), "a")
    shown.append(text_of(asyncio.run(recall.search_history("hello"))))
    backend.close()
    path = config_file(tmp_path / "fleet.yaml", tmp_path / "w", store)
    assert cli_main(["inspect", "--config", str(path)]) != 0
    cli = capsys.readouterr()
    shown += [cli.out, cli.err, caplog.text]
    assert "the PostgreSQL store (schema" in cli.err, cli.err
    assert "Error" in shown[6] and "search index not updated" in caplog.text
    return shown


@settings(max_examples=15, suppress_health_check=_SLOW_OK)
@given(data=st.data(), host=_HOSTS, user=_USERS, db=_DBS, password=_PASSWORDS)
def test_an_unreachable_store_shows_no_name_of_the_server(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
    host: str,
    user: str,
    db: str,
    password: str,
) -> None:
    """Nothing listens on port 1 of 127.0.0.1 (`hostaddr`: the host name is not resolved)."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ENV, password)
    dsn = data.draw(_dsns(host, user, db, hostaddr="127.0.0.1"), label="dsn")
    shown = _shown_by_a_store_that_fails(tmp_path, dsn, "t_unreach", caplog, capsys)
    assert "connection refused" in shown[0], shown[0]
    assert not _leaks(shown, dsn, host, user, db, password, "127.0.0.1")


@settings(max_examples=15, suppress_health_check=_SLOW_OK)
@given(
    data=st.data(),
    user=st.one_of(st.just("postgres"), _USERS),
    db=st.one_of(st.just("postgres"), _DBS),
    password=st.one_of(st.just(PASSWORD), _PASSWORDS),
)
def test_a_server_refusing_the_login_shows_none_of_its_names(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    data: st.DataObject,
    user: str,
    db: str,
    password: str,
) -> None:
    """A real server (its socket directory is the host) refuses a wrong user, database or
    password."""
    if (user, db, password) == ("postgres", "postgres", PASSWORD):
        password = "zqpw-wrong"
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ENV, password)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    host = str(pg_server.root)
    dsn = data.draw(_dsns(host, user, db, port=PORT), label="dsn")
    shown = _shown_by_a_store_that_fails(tmp_path, dsn, pg_schema, caplog, capsys)
    said = (
        "password authentication failed"
        if user != "postgres" or password != PASSWORD
        else ("the database does not exist")
    )
    assert said in shown[0], shown[0]
    names = [host, password] + [n for n in (user, db) if n != "postgres"]
    assert not _leaks(shown, dsn, *names, PASSWORD)


def test_a_working_store_is_named_by_its_schema_in_the_cli(
    tmp_path: Path, pg_store: PgStore, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = f"postgresql://postgres@{quote(str(pg_store.server.root), safe='')}:{PORT}/postgres"
    store = pg_store.fields(dsn=dsn, password_env=ENV)
    path = config_file(tmp_path / "fleet.yaml", tmp_path / "w", store)
    assert cli_main(["inspect", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"store: the PostgreSQL store (schema {pg_store.schema})" in out, out
    assert str(pg_store.server.root) not in out and "actx-pg" not in out
    assert pg_store.password not in out


# -- issue 46, items 9 and 3: whole names only, and the names of a service ---------------------


def test_i46_9_names_are_scrubbed_as_whole_tokens() -> None:
    """The docs' role ``agent`` and database ``ctx``: an error naming the schema
    ``adv4_agentscope_ctx`` keeps it whole (it read ``adv4_***scope_***``: the difference gave
    both names away), and the names standing alone are replaced, a sentence's full stop or a
    hostname's dots and dashes around them or not."""
    secrets = Secrets("host=db-1.internal user=agent dbname=ctx")
    said = (
        'permission denied for schema adv4_agentscope_ctx of database "ctx" (role agent); '
        "user agent. host db-1.internal, not db-1.internal.example or ctx-2 or agent_ctx"
    )
    assert secrets.scrub(said) == (
        'permission denied for schema adv4_agentscope_ctx of database "***" (role ***); '
        "user ***. host ***, not db-1.internal.example or ctx-2 or agent_ctx"
    )


def _service_file(path: Path, service: str, names: dict[str, str]) -> Path:
    """A `pg_service.conf` whose section `service` holds `names`, among others', as libpq
    reads it (comments, blank lines, indented lines)."""
    lines = ["# the operator's services", "[other]", "host=zqhostother", ""]
    lines += [f"  [{service}]  # ours"] + [f"{k}={v}" for k, v in names.items()]
    lines += ["", "[after]", "user=zquserafter"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_i46_3_a_services_names_are_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``service=NAME``: host, user, database and password come from the section of
    `pg_service.conf` (``PGSERVICEFILE``; else the system's, ``PGSYSCONFDIR``, when the
    user's file has no such section), and are scrubbed as the DSN's own names are; another
    section's are not the store's."""
    names = {"host": "zqhostsvc.example", "user": "zqusersvc", "dbname": "zqdbsvc",
             "password": "zqpwsvc!"}  # fmt: skip
    said = 'permission denied for database "zqdbsvc" (user zqusersvc at zqhostsvc.example) zqpwsvc!'
    monkeypatch.setenv("PGSERVICEFILE", str(_service_file(tmp_path / "user.conf", "ours", names)))
    assert (
        Secrets("service=ours").scrub(said)
        == 'permission denied for database "***" (user *** at ***) ***'
    )
    assert "zqhostother" in Secrets("service=ours").scrub("zqhostother zquserafter zqusersvc")
    system = tmp_path / "etc"
    system.mkdir()
    _service_file(system / "pg_service.conf", "sys", names)
    monkeypatch.setenv("PGSYSCONFDIR", str(system))
    monkeypatch.setenv("PGSERVICE", "sys")  # the service named by libpq's environment
    assert Secrets("dbname=zqother").scrub(said).count("***") == 4


def test_i46_3_a_service_refused_by_the_server_shows_none_of_its_names(
    tmp_path: Path,
    pg_server: PostgresServer,
    pg_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's case: a ``service=NAME`` DSN whose user may connect to its database but not
    make the store's schema there. "permission denied for database ..." is a database error,
    told by its first line: the database's name, from the service file, reached the errors,
    the CLI and the model."""
    import psycopg

    user, db, password, service = (f"zq{k}{uuid.uuid4().hex[:8]}" for k in ("u", "d", "p", "s"))
    admin = psycopg.connect(pg_server.dsn, password=PASSWORD, autocommit=True)
    try:
        admin.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        admin.execute(f"CREATE DATABASE {db}")
        names = {"host": str(pg_server.root), "port": str(PORT), "user": user, "dbname": db,
                 "password": password}  # fmt: skip
        service_file = _service_file(tmp_path / "pg_service.conf", service, names)
        monkeypatch.setenv("PGSERVICEFILE", str(service_file))
        monkeypatch.delenv("PGPASSWORD", raising=False)
        monkeypatch.setenv(ENV, password)  # (the helper's password_env)
        caplog.set_level(logging.DEBUG)
        shown = _shown_by_a_store_that_fails(
            tmp_path, f"service={service}", pg_schema, caplog, capsys
        )
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {db}")
        admin.execute(f"DROP ROLE IF EXISTS {user}")
        admin.close()
    assert "permission denied for database" in shown[0], shown[0]
    assert not _leaks(shown, str(pg_server.root), user, db, password)
