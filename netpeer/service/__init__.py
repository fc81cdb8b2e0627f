"""netpeerd's service: the operations (``Service``), the write queue, the
reconciler and credentials. Knows the store and the dataplane only through
their interfaces (``netpeer.store.base``, ``netpeer.core.dataplane``)."""

from netpeer.service.operations import NetworkView, ServerStatus, Service
from netpeer.service.reconciler import SweepReport, SweepStatus
from netpeer.service.settings import Settings
from netpeer.service.tokens import TOKEN_PREFIX, hash_secret

__all__ = ["Service", "Settings", "NetworkView", "ServerStatus", "SweepReport", "SweepStatus", "TOKEN_PREFIX",
           "hash_secret"]
