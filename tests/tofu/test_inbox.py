"""The request inbox in OpenTofu, through the real ``tofu`` against a real netpeerd on real OVN:
the ``netpeer_peering_requests`` data source reads the requests to a team's network, and a
``netpeer_peering`` built from a request's fields accepts it; both halves end Bound."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tofu

ACCEPT = """
terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer" }
  }
}

provider "netpeer" {}

data "netpeer_peering_requests" "inbox" {
  network = "net-b"
}

resource "netpeer_peering" "accepted" {
  for_each         = { for r in data.netpeer_peering_requests.inbox.requests : r.id => r }
  network          = each.value.network
  name             = "from-${each.value.requester_network}"
  remote_namespace = each.value.requester_namespace
  remote_network   = each.value.requester_network
  remote_uid       = each.value.requester_uid
}

output "requests" { value = data.netpeer_peering_requests.inbox.requests }
output "phases" { value = { for k, p in netpeer_peering.accepted : p.name => p.phase } }
"""


def test_a_request_read_by_the_data_source_is_accepted_in_code(modules, netpeerd):
    with netpeerd.client() as admin:
        admin.create_network("team-a", "net-a", ["10.1.0.0/24"])
        admin.create_network("team-b", "net-b", ["10.2.0.0/24"])
        admin.create_network("team-b", "other", ["10.3.0.0/24"])
    with netpeerd.tenant("team-a") as a:
        a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
        a.create_peering("team-a", "net-a", "to-other", "other", "team-b")
    b = modules("b", "team-b")
    b.write(ACCEPT)
    b.init()
    b.apply()
    out = b.outputs()
    [request] = out["requests"]
    assert (request["requester_namespace"], request["requester_network"], request["prefixes"]) == \
        ("team-a", "net-a", ["10.1.0.0/24"])
    assert request["expires_at"] and request["id"].startswith("team-a.net-a.to-b.")
    assert out["phases"] == {"from-net-a": "Bound"}
    with netpeerd.tenant("team-a") as a:
        assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"
        assert a.get_peering("team-a", "net-a", "to-other")["phase"] == "Pending"
