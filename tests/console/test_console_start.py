"""A console (or metrics endpoint) that cannot serve stops netpeerd's start
in one line naming the setting and its value, with nothing left serving:
not a start that serves the API while the console's address takes
connections nobody answers."""

from __future__ import annotations

import errno
import socket
import time

import pytest

from netpeer.daemon import EXIT_REFUSED, Daemon
from netpeer.errors import InvalidArgument
from netpeer.observe.endpoint import HttpEndpoint
from tests.support import netpeerd_config, netpeerd_process


@pytest.mark.parametrize("field", ["console_listen", "metrics_listen"])
def test_an_address_already_taken_ends_netpeerd_in_one_line(ovn, state_dir, field):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    address = f"127.0.0.1:{taken.getsockname()[1]}"
    netpeerd = netpeerd_process(state_dir, ovn.nb_remote, **{field: address})
    try:
        netpeerd.spawn()
        code = netpeerd.exit_code(timeout=30)
        log = netpeerd.log.read_text()
        assert code == EXIT_REFUSED, f"netpeerd with {field} = {address} (taken) ended {code}: {log[-2000:]}"
        lines = [line for line in log.splitlines() if not line[:4].isdigit()]   # not the log's timestamped lines
        assert lines == [f"netpeerd: {field}: '{address}' cannot be listened on (Address already in use)"], log
        assert not (state_dir / "netpeer.sock").exists(), "the API is left listening"
    finally:
        netpeerd.stop()
        taken.close()


@pytest.mark.parametrize("field", ["console_listen", "metrics_listen"])
def test_an_endpoint_whose_thread_fails_at_start_fails_the_start_in_one_line(ovn, state_dir, monkeypatch, field):
    # A fault planted where the endpoint's thread begins to serve (out of descriptors, say).
    def accept(self):
        raise OSError(errno.EMFILE, "Too many open files")
    monkeypatch.setattr(HttpEndpoint, "_accept", accept)
    with socket.socket() as s:   # a free port (metrics_listen takes no port 0)
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    config = netpeerd_config(state_dir, ovn.nb_remote, **{field: address})
    daemon = Daemon(config)
    start = time.monotonic()
    try:
        with pytest.raises(InvalidArgument) as exc:
            daemon.start()
    except BaseException:
        daemon.stop(grace=0)
        raise
    took = time.monotonic() - start
    assert exc.value.message == f"{field}: '{address}' cannot be served (OSError: [Errno 24] Too many open files)"
    assert took < 5, f"the start took {took:.1f} s to fail"
    assert not (state_dir / "netpeer.sock").exists(), "the API is left listening"
