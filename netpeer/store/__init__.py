"""Desired state and status of networks, peerings and tokens."""

from netpeer.store.base import Store, Transaction  # noqa: F401
