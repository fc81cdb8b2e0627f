"""Trust tests (issue 6, first half): tests that attack netpeer.

- test_isolation.py    four tenants: every RPC with every foreign name is PERMISSION_DENIED, nothing changes;
                       only admin mints tokens; bad credentials are UNAUTHENTICATED
- test_enumeration.py  missing / invisible / non-consenting remotes: same answer, same store work, response
                       times not distinguishable (Mann-Whitney, KS, permutation); tokens hashed, compare_digest
- test_fuzz.py         hypothesis on all 12 RPCs and on credentials; state invariants after every call
- test_model.py        hypothesis state machine against the reference model (model.py), every step
- test_concurrency.py  threads with their own clients; the service's serialization replayed through the model
- test_stacks.py       tenant-a and tenant-b Pulumi stacks applied at the same time
- test_drift.py        hand edits of OVN restored by a running netpeerd; others' rows untouched
- test_regressions.py  the bugs these tests found
- test_metrics_exposure.py  10,000 scrapes and 1,000 idle connections to /metrics: netpeerd's files and threads
                       flat, other tenants' reads within 1.5x; metrics_listen's TLS rule, bearer and basic auth

Helpers: invariants.py (state invariants), model.py (consent rules), recording.py (serialization order),
strategies.py (hypothesis strategies), stats.py (two-sample tests), rpc.py (raw gRPC, dumps),
scraper.py (scrapes from a process of its own),
report.py (figures printed at the end of the run; JSON to $NETPEER_TRUST_REPORT).

Sizes: NETPEER_FUZZ_EXAMPLES (per RPC, default 400), NETPEER_FUZZ_SEQUENCES (250), NETPEER_MODEL_EXAMPLES
(100), NETPEER_MODEL_STEPS (40), NETPEER_CONCURRENCY_THREADS / _OPS / _ROUNDS / _SEED (6 / 120 / 3),
NETPEER_ORACLE_ROUNDS (400), NETPEER_ORACLE_SEED.
"""
