"""The PostgreSQL store of the fleet tests as configuration: the ``store:`` fields of a schema
on the private server (its password in `PASSWORD_ENV`, which the `pg_password` fixture sets),
a `ContextConfig` on it, and the YAML file the CLI reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentscope_ctx.core.config._config import ContextConfig
from tests.fleet.postgres_server import PostgresServer

__all__ = ["PASSWORD_ENV", "PgStore", "config_file", "fleet_config", "store_fields"]

PASSWORD_ENV = "AGENTSCOPE_CTX_TEST_PGPASSWORD"
"""The `password_env` the tests name (the `pg_password` fixture sets it)."""


def store_fields(server: PostgresServer, schema: str, **fields: str) -> dict[str, str]:
    """The ``store:`` fields of the PostgreSQL store in `schema` on `server`; `fields` override
    (another ``dsn`` or ``password_env``)."""
    return {
        "kind": "postgres",
        "dsn": server.dsn,
        "password_env": PASSWORD_ENV,
        "schema_name": schema,
        **fields,
    }


def fleet_config(
    working_dir: Path, server: PostgresServer, schema: str, **fields: Any
) -> ContextConfig:
    """A config with `fields` on the PostgreSQL store in `schema`, `working_dir` its own."""
    return ContextConfig(**fields, working_dir=working_dir, store=store_fields(server, schema))


def config_file(path: Path, working_dir: Path, store: dict[str, str]) -> Path:
    """Write the YAML config the CLI reads (`working_dir`, `store`) to `path`; returns it."""
    path.write_text(yaml.safe_dump({"working_dir": str(working_dir), "store": store}))
    return path


@dataclass(frozen=True)
class PgStore:
    """One test's PostgreSQL store (the `pg_store` fixture): its schema on the private
    server, the password in `PASSWORD_ENV`."""

    server: PostgresServer
    schema: str
    password: str

    def fields(self, **fields: str) -> dict[str, str]:
        """The ``store:`` fields (`store_fields`)."""
        return store_fields(self.server, self.schema, **fields)

    def config(self, working_dir: Path, **fields: Any) -> ContextConfig:
        """A config on this store (`fleet_config`)."""
        return fleet_config(working_dir, self.server, self.schema, **fields)
