# netpeer: the two commands a newcomer needs are `make demo` and `make test`.
PY := .venv/bin/python

.PHONY: setup demo demo-down demo-sites demo-sites-down walkthrough test test-fast check-proto proto
.PHONY: schema check-schema clean help bench bench-quick jepsen packages

setup:                ## install OVN, Open vSwitch and the Python environment
	bash scripts/setup.sh

demo:                 ## local stack with a chassis, two tenants' Pulumi stacks, ping across the peering
	bash scripts/setup.sh --demo
	$(PY) -m netpeer_dev.demo up

demo-down:            ## destroy the demo's stacks, instances, daemons and state; check nothing is left
	@if [ -x $(PY) ]; then $(PY) -m netpeer_dev.demo down; else echo "no .venv: nothing to tear down"; fi

demo-sites:           ## two sites (OVN-IC over WireGuard), a tenant in each, a peering across them, ping both ways
	bash scripts/setup.sh --sites
	$(PY) -m netpeer_dev.demo_sites up

demo-sites-down:      ## stop the two sites: every daemon by pid, namespaces, keys, state; check nothing is left
	@if [ -x $(PY) ]; then $(PY) -m netpeer_dev.demo_sites down; else echo "no .venv: nothing to tear down"; fi

walkthrough: setup    ## the life of a peering with the netpeer CLI (same dev stack: make demo-down first)
	bash examples/cli/walkthrough.sh

check-proto: setup    ## the generated gRPC code matches schema/
	PYTHON=$(PY) bash scripts/gen-proto.sh --check

proto: setup          ## regenerate the gRPC code from schema/
	PYTHON=$(PY) bash scripts/gen-proto.sh

schema: setup         ## regenerate schema/pulumi/schema.json from the provider core
	$(PY) -m netpeer_provider.plugin.schema_json > schema/pulumi/schema.json

check-schema: setup   ## schema/pulumi/schema.json is what the provider core describes
	$(PY) -m netpeer_provider.plugin.schema_json --check schema/pulumi/schema.json

test: setup check-proto check-schema  ## the whole suite, against real OVN daemons
	$(PY) -m pytest -q -rfEs

packages: setup       ## dist/: the wheel, the Pulumi plugin tarball, the OpenTofu mirror + lock file, the npm SDK
	PYTHON=$(PY) bash scripts/build-packages.sh

test-fast: setup      ## unit tests only
	$(PY) -m pytest -q tests/unit

help:                 ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:[^#]*## /\t/' | expand -t 16

bench: setup          ## benchmarks (about an hour): results/<timestamp>/ (JSON, Markdown, PNG)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m bench $(BENCH_ARGS)

bench-quick: setup    ## a 2-minute smoke run of the benchmark harness (figures mean nothing)
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m bench --quick $(BENCH_ARGS)

jepsen: setup         ## clients' histories checked for linearizability under faults (32 min): results/jepsen/<timestamp>/
	$(PY) -m pip install -q -e '.[dev,bench]'
	$(PY) -m tests.linearizability $(JEPSEN_ARGS)
