#!/usr/bin/env bash
# The life of a peering with the netpeer CLI, on a local stack (real OVN).
# Two tenants, team-a and team-b, each with its own token, peer their networks.
# Stop the stack afterwards with: make demo-down   (or: netpeer dev down --purge)
set -euo pipefail
cd "$(dirname "$0")/../.."
NETPEER=${NETPEER:-.venv/bin/netpeer}
# The stack lives in $NETPEER_DEV_DIR (default ~/.local/state/netpeer/dev).
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

step "start OVN (NB, SB, northd) and netpeerd"
eval "$($NETPEER dev up --sweep-interval 1s)"
$NETPEER dev status
NB=$($NETPEER dev status -o json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["nb_remote"])')

step "the admin mints one token per tenant"
TOKEN_A=$($NETPEER token create --namespace team-a)
TOKEN_B=$($NETPEER token create --namespace team-b)
A() { NETPEER_TOKEN=$TOKEN_A "$NETPEER" "$@"; }
B() { NETPEER_TOKEN=$TOKEN_B "$NETPEER" "$@"; }

step "each tenant creates a network"
A network delete net-a >/dev/null 2>&1 || true   # re-runs start clean
show A network create net-a --subnet 10.1.0.0/24 --subnet fd00:a::/64 --description "team A"
show B network create net-b --subnet 10.2.0.0/24 --route 10.9.0.0/24 --description "team B"

step "team A consents: Pending (the same answer whether team-b/net-b exists or not)"
show A peering create net-a to-b team-b/net-b
show A peering list net-a

step "team B consents: Bound, and OVN is programmed for both sides in one transaction"
show B peering create net-b to-a team-a/net-a
show A peering list net-a
show ovn-nbctl --db="$NB" show

step "a network with peerings cannot be deleted"
A network delete net-a || true

step "team B withdraws: team A's half goes back to Pending (RemoteWithdrawn), the OVN peer ports go"
show B peering delete net-b to-a
show A peering list net-a
ovn-nbctl --db="$NB" --bare --columns=name list Logical_Router_Port | grep -c np-peer- || echo "0 peer ports"

step "overlapping prefixes: Failed, with the prefixes named"
show B network create net-c --subnet 10.1.0.0/16
show B peering create net-c to-a team-a/net-a
show A peering create net-a to-c team-b/net-c
show A peering show net-a to-c

step "unanswered consents expire after their TTL (here 3s)"
show A peering create net-a short team-x/nowhere --ttl 3s
sleep 5
A peering show net-a short || echo "(expired and garbage-collected)"

step "clean up the tenants' objects"
A peering delete net-a to-b; A peering delete net-a to-c; B peering delete net-c to-a
A network delete net-a; B network delete net-b; B network delete net-c
printf '\nDone. The stack is still running: `netpeer dev status`; stop it with `make demo-down`.\n'
