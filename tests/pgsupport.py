"""PostgreSQL for the tests: one private cluster per test session
(``netpeer_dev.postgres.PgCluster``, Debian's binaries, a unix socket), a
fresh database per test. A missing PostgreSQL fails the test, never skips.
Registered as a plugin by tests/conftest.py."""

from __future__ import annotations

import itertools
import os
import shutil
from typing import Iterator

import pytest

from tests.support import short_tmpdir

_names = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator["object"]:
    """A running cluster, stopped by pid and removed at the end of the session."""
    try:
        import psycopg  # noqa: F401
        from netpeer_dev.postgres import PgCluster, PostgresError
    except ImportError as exc:
        pytest.fail(f"psycopg is missing ({exc}): run scripts/setup.sh (or `make test`)")
    owner = short_tmpdir("nppg-")
    cluster = PgCluster(owner, port=5432)
    try:
        cluster.start()
    except PostgresError as exc:
        cluster.remove()
        shutil.rmtree(owner, ignore_errors=True)
        pytest.fail(f"PostgreSQL cannot run here: {exc}")
    try:
        yield cluster
    finally:
        if os.environ.get("NETPEER_KEEP_STATE") != "1":
            cluster.remove()
            shutil.rmtree(owner, ignore_errors=True)


@pytest.fixture
def pg_url(pg_cluster) -> Iterator[str]:
    """The URL of a database of its own for this test, dropped afterwards."""
    name = f"t{os.getpid()}_{next(_names)}"
    url = pg_cluster.create_database(name)
    try:
        yield url
    finally:
        pg_cluster.drop_database(name)


def make_store(kind: str, tmp_path, pg_cluster_or_none=None, **options):
    """A fresh store of ``kind`` ("sqlite" or "postgresql"), made with ``options``."""
    from netpeer.store.base import open_store
    if kind == "sqlite":
        from netpeer.store.sqlite import SqliteStore
        return SqliteStore(tmp_path / "netpeer.db", **options)
    name = f"s{os.getpid()}_{next(_names)}"
    return open_store(pg_cluster_or_none.create_database(name), **options)


__all__ = ["make_store", "pg_cluster", "pg_url"]
