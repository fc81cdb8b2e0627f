"""netpeer benchmarks: ``python -m bench`` (``make bench``).

Each figure is measured against real daemons (OVN central and a chassis from
``netpeer_dev.daemons``, netpeerd as its own process) in private temp
directories, written to ``results/<timestamp>/`` as JSON, a Markdown table
and PNG plots. Targets are reported, never asserted.
"""
