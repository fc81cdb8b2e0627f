# netpeer: the two commands a newcomer needs are `make demo` and `make test`.
PY := .venv/bin/python

.PHONY: setup demo demo-down test test-fast check-proto proto clean

setup:                ## install OVN, Open vSwitch and the Python environment
	bash scripts/setup.sh

demo: setup           ## start the local stack and walk a peering through its life
	bash examples/cli/walkthrough.sh

demo-down:            ## stop the local stack and delete its state
	$(PY) -m netpeer.cli.main dev down --purge

check-proto: setup    ## the generated gRPC code matches schema/
	PYTHON=$(PY) bash scripts/gen-proto.sh --check

proto: setup          ## regenerate the gRPC code from schema/
	PYTHON=$(PY) bash scripts/gen-proto.sh

test: setup check-proto  ## the whole suite, against real OVN daemons
	$(PY) -m pytest -q -rfEs

test-fast: setup      ## unit tests only
	$(PY) -m pytest -q tests/unit
