"""Bad input at the start of a replica: an unreachable or misconfigured
database URL, a database with a newer schema than the binary, a replica
with another ``owner`` than the others. Each ends ``netpeer serve`` with one
line naming the setting and its value, a non-zero exit, and nothing changed
(the database and OVN as they were)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import psycopg
import pytest

from netpeer.config import Config
from netpeer.store import migrations
from tests.support import netpeerd_config


def serve(config: Config, directory) -> subprocess.CompletedProcess:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "netpeerd.toml"
    if isinstance(config, str):
        path.write_text(config)
    else:
        config.write(path)
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", "serve", "--config", str(path)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def one_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode != 0, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {out.stderr}"
    return lines[0]


def snapshot(url: str) -> list:
    with psycopg.connect(url) as db:
        tables = db.execute("SELECT tablename FROM pg_tables WHERE schemaname='public' ORDER BY 1").fetchall()
        meta = db.execute("SELECT * FROM meta ORDER BY key").fetchall() if ("meta",) in tables else []
        # leader_sweeps is the running leader's own record, moved by its sweeps while the test runs.
        return [tables, [row for row in meta if row[0] != "leader_sweeps"]]


def test_an_unreachable_database(state_dir, ovn, pg_cluster):
    url = pg_cluster.url("netpeer").replace(str(pg_cluster.socket_dir), "/nonexistent-dir")
    config = dataclasses.replace(netpeerd_config(state_dir / "r", ovn.nb_remote), store=url)
    line = one_line(serve(config, state_dir / "r"))
    assert "store" in line and "/nonexistent-dir" in line and "cannot connect" in line, line
    assert ovn.nbctl("--bare", "--columns=_uuid", "list", "Logical_Router").strip() == ""


@pytest.mark.parametrize("url, why", [
    ("postgresql://db.example:notaport/netpeer", "is not a valid PostgreSQL URL"),
    ("postgresql://db.example", "names no database"),
])
def test_a_misconfigured_url(state_dir, url, why):
    text = f'listen = "unix://{state_dir}/r/n.sock"\nstore = "{url}"\novn_nb = "unix:/nowhere"\n'
    line = one_line(serve(text, state_dir / "r"))
    assert line.startswith("error: store: ") and url in line and why in line, line


def test_a_database_with_a_newer_schema(state_dir, ovn, pg_url):
    config = dataclasses.replace(netpeerd_config(state_dir / "r", ovn.nb_remote), store=pg_url)
    from netpeer.store.postgres import PostgresStore
    PostgresStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("UPDATE meta SET value=%s WHERE key='schema_version'", (str(migrations.LATEST + 1),))
    before = snapshot(pg_url)
    line = one_line(serve(config, state_dir / "r"))
    assert f"schema version {migrations.LATEST + 1}" in line and f"up to {migrations.LATEST}" in line, line
    assert snapshot(pg_url) == before


def test_a_replica_with_another_owner(state_dir, ovn, pg_url):
    first = dataclasses.replace(netpeerd_config(state_dir / "r1", ovn.nb_remote), store=pg_url)
    from netpeer_dev.process import NetpeerdProcess
    from tests.support import ADMIN_TOKEN
    running = NetpeerdProcess(first, state_dir / "r1", ADMIN_TOKEN)
    running.start(sweep=True)          # its first sweep done: nothing else changes the database
    try:
        before = snapshot(pg_url)
        rows = ovn.nbctl("--bare", "--columns=_uuid,external_ids", "list", "NB_Global")
        other = dataclasses.replace(netpeerd_config(state_dir / "r2", ovn.nb_remote), store=pg_url, owner="other")
        line = one_line(serve(other, state_dir / "r2"))
        assert line.startswith("error: owner: 'other'") and "'netpeer'" in line, line
        assert snapshot(pg_url) == before
        assert ovn.nbctl("--bare", "--columns=_uuid,external_ids", "list", "NB_Global") == rows
    finally:
        running.stop()
