"""The gRPC edge of netpeerd: conversion, error mapping, auth, serving.

This package is where grpc is imported; it says first how grpc should
behave around ``fork``. grpcio 1.85's core registers fork handlers that are
on while its Python layer's are off (a mixed state its maintainers call
broken). Every fork in netpeer's processes is a ``subprocess`` fork+exec,
for which grpc's own guidance is to turn the handlers off: with them on,
one ``ovn-nbctl`` call of the benchmark hung in the core's prefork handler,
its timer thread and the forking thread waiting on each other, after the
process had used a channel. A value the caller set is kept.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
