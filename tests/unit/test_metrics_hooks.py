"""The hooks netpeerd's parts call without metrics (netpeer/observe/metrics.py,
``NONE``) are those of the real metrics, name for name: a misspelled hook
fails at once instead of measuring nothing."""

from __future__ import annotations

import inspect

import pytest

from netpeer.observe.metrics import NONE, Metrics


def _methods(cls) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_the_no_op_metrics_have_every_hook_of_the_real_ones():
    real, none = _methods(Metrics), _methods(type(NONE))
    real.pop("serve")   # without metrics nothing is served
    assert real, "Metrics has no hooks?"
    assert none == real


def test_a_misspelled_hook_fails():
    NONE.rpc("ListNetworks", "OK", 0.001)
    with pytest.raises(AttributeError):
        NONE.rcp("ListNetworks", "OK", 0.001)
    with pytest.raises(AttributeError):
        NONE.serve("127.0.0.1:0")
