"""netpeer's dev stack: OVN daemons, instances (network namespaces), the demo.

Tooling for one machine, used by ``netpeer dev``, ``make demo``, the tests and
the benchmarks. netpeerd itself never imports it."""
