"""Start (or stop) a private PostgreSQL and Redis for the fleet example, in a folder of yours.

    python examples/fleet/servers.py start ./fleet-data    # prints what to export
    python examples/fleet/servers.py stop ./fleet-data
    python examples/fleet/servers.py start ./fleet-data    # again: the same servers, same data

PostgreSQL listens on a unix socket in FOLDER/pg only (no TCP port to collide with), Redis on a
free port of 127.0.0.1, with its append-only file in FOLDER/redis. The script does what an
operator does by hand: `initdb` with a superuser, then, as that superuser, a migration role
that owns the database and an ordinary role for the workers (row-level security binds it; a
superuser would bypass it); as the migration role, the store's tables and the workers' grants
(rows, not tables: docs/tenants.md, "A migration role and a workers' role"). It writes
FOLDER/env.sh (the variables the workers and the client read), FOLDER/fleet.yaml (the
workers' config: examples/fleet/fleet.yaml plus the store and the working dir) and
FOLDER/maintenance.yaml (the same as the migration role: the CLI's, and indexer.py's).

A start on the folder of a previous start runs its servers again on the data they left (the
same roles and passwords, the sessions in Redis); any other folder that is not empty is
refused. Needs PostgreSQL's server binaries (Debian: postgresql) and redis-server on the
machine, and `pip install -e ".[fleet]"`.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import yaml

HERE = Path(__file__).resolve().parent
ROLE, MIGRATE, DATABASE = "agent", "ctx_migrate", "ctx"
# The SQL an operator runs as the superuser (psql "host=FOLDER/pg user=postgres dbname=postgres"):
SETUP_SQL = [
    "CREATE ROLE ctx_migrate LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD {migrate_password}",
    "CREATE ROLE agent LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD {password}",
    "CREATE DATABASE ctx OWNER ctx_migrate",
]
# ... and as ctx_migrate in the database ctx, once the store has made its tables:
GRANTS_SQL = [
    "GRANT USAGE ON SCHEMA agentscope_ctx TO agent",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA agentscope_ctx TO agent",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA agentscope_ctx TO agent",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA agentscope_ctx "
    "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO agent",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA agentscope_ctx GRANT USAGE ON SEQUENCES TO agent",
]


def pg_bindir() -> Path:
    """initdb and pg_ctl: `pg_config --bindir`, else Debian's newest /usr/lib/postgresql/N/bin."""
    found = shutil.which("pg_config")
    if found:
        path = Path(
            subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip()
        )
        if (path / "initdb").exists():
            return path
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if versions:
        return Path(versions[-1])
    sys.exit("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")


def run_pg(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """PostgreSQL refuses to run as root: then its tools run as the OS user `postgres`. With
    `check`, a tool that fails ends the script with what it said."""
    command = [str(pg_bindir() / tool), *args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True)
    if check and done.returncode:
        sys.exit(f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    return done


def start(folder: Path) -> None:
    """A new folder (or an empty one): new servers, roles and tables. The folder of a previous
    start: its servers again, on the data it holds (what is running already is left running)."""
    if (folder / "pg" / "data" / "PG_VERSION").exists() and (folder / "env.sh").exists():
        restart(folder)
        return
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        sys.exit(
            f"{folder} is not the data folder of a previous `servers.py start` (it has no "
            f"pg/data and env.sh): give a new or empty folder, or the one a start made (a "
            f"start that failed leaves it incomplete: rm -rf it and start again)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    pg = folder / "pg"
    pg.mkdir()
    superuser_pw, agent_pw = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    migrate_pw = secrets.token_urlsafe(18)
    (pg / "pw").write_text(superuser_pw + "\n")
    if os.geteuid() == 0:  # the server's files are the `postgres` user's
        user = pwd.getpwnam("postgres")
        for path in (pg, pg / "pw"):
            os.chown(path, user.pw_uid, user.pw_gid)
        if subprocess.run(["runuser", "-u", "postgres", "--", "test", "-w", str(pg)]).returncode:
            sys.exit(
                f"the OS user postgres cannot reach {pg}: pick a folder it can (e.g. /tmp/...)"
            )
    run_pg("initdb", "-D", str(pg / "data"), "-U", "postgres", "--pwfile", str(pg / "pw"),
           "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8")  # fmt: skip
    (pg / "pw").unlink()
    start_postgres(pg)
    # The role and the database, as the superuser (psycopg comes with the fleet extra)
    import psycopg
    from psycopg import sql

    superuser = f"host={pg} port=5432 user=postgres dbname=postgres"
    with psycopg.connect(superuser, password=superuser_pw, autocommit=True) as conn:
        for statement in SETUP_SQL:
            shown = statement.format(password="'…'", migrate_password="'…'")
            print(f"SQL: {shown};")
            secret = {
                "password": sql.Literal(agent_pw),
                "migrate_password": sql.Literal(migrate_pw),
            }
            conn.execute(sql.SQL(statement).format(**secret))
    tables_and_grants(pg, migrate_pw)
    (folder / "redis").mkdir()
    redis_port = free_port()
    start_redis(folder, redis_port)

    # The workers' config: the example's settings, this database, a working dir here
    config = yaml.safe_load((HERE / "fleet.yaml").read_text())
    config["working_dir"] = str(folder / "ctx")
    config["store"] = {
        "kind": "postgres",
        "dsn": f"host={pg} port=5432 user={ROLE} dbname={DATABASE}",  # a unix-socket DSN
        "password_env": "CTX_DB_PASSWORD",  # never the password itself in a config
    }
    (folder / "fleet.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    config["store"] = {  # the CLI's and indexer.py's: every tenant's rows (the owner's role)
        "kind": "postgres",
        "dsn": f"host={pg} port=5432 user={MIGRATE} dbname={DATABASE}",
        "password_env": "CTX_MIGRATE_PASSWORD",
    }
    config["working_dir"] = str(folder / "maintenance")
    (folder / "maintenance.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {
        "FLEET_CONFIG": str(folder / "fleet.yaml"),
        "MAINTENANCE_CONFIG": str(folder / "maintenance.yaml"),
        "CTX_DB_PASSWORD": agent_pw,
        "CTX_MIGRATE_PASSWORD": migrate_pw,  # for the CLI and indexer.py, not the workers
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "FLEET_DIR": str(folder),
    }
    write_env(folder, env)


def restart(folder: Path) -> None:
    """The servers of a previous start, on its data: the roles' passwords are env.sh's, and so
    is Redis's port while it is free (else another, written into env.sh)."""
    env = read_env(folder / "env.sh")
    pg = folder / "pg"
    if run_pg("pg_ctl", "-D", str(pg / "data"), "status", check=False).returncode == 0:
        print(f"PostgreSQL runs already, on its data in {pg}")
    else:
        start_postgres(pg)
        print(f"PostgreSQL started again, on its data in {pg}")
    tables_and_grants(pg, env["CTX_MIGRATE_PASSWORD"], "checked")  # a newer version's schema
    port = urlparse(env["REDIS_URL"]).port or 6379
    if (folder / "redis" / "pid").exists() and port_answers(port):
        print(f"Redis runs already, on 127.0.0.1:{port}")
    else:
        if port_answers(port):  # another program took the port since
            port = free_port()
        start_redis(folder, port)
        print(f"Redis started again, on its data in {folder / 'redis'}")
    env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    write_env(folder, env)


def start_postgres(pg: Path) -> None:
    """The server of the cluster in pg/data, on a unix socket in pg only."""
    run_pg("pg_ctl", "-D", str(pg / "data"), "-l", str(pg / "log"), "-w", "start",
           "-o", f"-k {pg} -c listen_addresses=''")  # fmt: skip


def tables_and_grants(pg: Path, migrate_pw: str, done: str = "made") -> None:
    """The store's tables, made (or brought to this version's schema) by the store as the
    migration role, then the workers' role's grants (GRANT is idempotent)."""
    import psycopg

    from agentscope_ctx.stores.postgres import PostgresEngine

    os.environ["CTX_MIGRATE_PASSWORD"] = migrate_pw
    engine = PostgresEngine(
        f"host={pg} port=5432 user={MIGRATE} dbname={DATABASE}",
        password_env="CTX_MIGRATE_PASSWORD",
        schema="agentscope_ctx",
    )
    with engine.connection():
        print(f"the store's tables {done} as {MIGRATE}")
    engine.close()
    migrator = f"host={pg} port=5432 user={MIGRATE} dbname={DATABASE}"
    with psycopg.connect(migrator, password=migrate_pw, autocommit=True) as conn:
        for statement in GRANTS_SQL:
            print(f"SQL ({MIGRATE}): {statement};")
            conn.execute(statement)


def start_redis(folder: Path, port: int) -> None:
    """redis-server on 127.0.0.1:PORT, its append-only file in FOLDER/redis (a restart keeps
    the sessions, the app's storage and RedisMemory)."""
    subprocess.run(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--daemonize", "yes",
         "--dir", str(folder / "redis"), "--pidfile", str(folder / "redis" / "pid"),
         "--logfile", str(folder / "redis" / "log"), "--save", "", "--appendonly", "yes"],
        check=True,
    )  # fmt: skip
    for _ in range(100):
        if port_answers(port):
            return
        time.sleep(0.1)
    sys.exit(f"redis-server did not come up on 127.0.0.1:{port} (its log: {folder}/redis/log)")


def read_env(path: Path) -> dict[str, str]:
    """The variables of an env.sh that write_env wrote."""
    pairs = (line.removeprefix("export ").partition("=") for line in path.read_text().splitlines())
    return {key: shlex.split(value)[0] for key, _, value in pairs if key and value}


def write_env(folder: Path, env: dict[str, str]) -> None:
    """FOLDER/env.sh, readable by its owner only (it holds the roles' passwords); printed."""
    script = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    (folder / "env.sh").write_text(script)
    (folder / "env.sh").chmod(0o600)
    print(script, end="")
    print(f"# . {folder}/env.sh   to set these; stop with: python {__file__} stop {folder}")


def stop(folder: Path) -> None:
    pg_data, pidfile = folder / "pg" / "data", folder / "redis" / "pid"
    if not pg_data.exists() and not pidfile.exists():
        sys.exit(f"{folder} holds no servers of `servers.py start`")
    running = (
        pg_data.exists()
        and not run_pg("pg_ctl", "-D", str(pg_data), "status", check=False).returncode
    )
    if running:
        run_pg("pg_ctl", "-D", str(pg_data), "-m", "fast", "-w", "stop")
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except ProcessLookupError:  # gone without its clean shutdown (a reboot, a kill -9)
            pidfile.unlink()
        for _ in range(300):  # redis-server removes it once its data is written
            if not pidfile.exists():
                break
            time.sleep(0.1)
    print(f"stopped; the data stays in {folder} (start again on it, or rm -rf it to start afresh)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit(__doc__)
    (start if sys.argv[1] == "start" else stop)(Path(sys.argv[2]).resolve())
