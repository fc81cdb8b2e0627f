"""Fixtures of the policy tests: netpeerd serves site "east" and is linked to a site "west" that never
answers, so that a cross-site peering passes the service's own checks (it is planned as Pending,
RemoteSiteUnreachable) and only the policy decides about it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Iterator

import pytest

from netpeer.config import SiteLink
from netpeer_dev.daemons import OvnDaemons
from tests.support import Netpeerd, start_netpeerd


@pytest.fixture
def netpeerd(ovn: OvnDaemons, state_dir: Path) -> Iterator[Netpeerd]:
    secret = state_dir / "east-west.secret"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, secrets.token_urlsafe(32).encode())
    os.close(fd)
    daemon = start_netpeerd(ovn, state_dir, site="east", site_listen=f"unix://{state_dir / 'site.sock'}",
                            sites=(SiteLink("west", f"unix://{state_dir / 'west-absent.sock'}", secret),))
    try:
        yield daemon
    finally:
        daemon.stop()
