"""The ``netpeer`` command."""
