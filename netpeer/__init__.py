"""netpeer: mutually consented network peerings as code, on a real OVN dataplane."""

__version__ = "0.1.0"
