# Team B: a network, and team B's consent to peer it with team A's network.
# `tofu init && tofu apply` (settings: NETPEER_ENDPOINT and NETPEER_TOKEN, or the variables below).

terraform {
  required_providers {
    netpeer = { source = "netpeer/netpeer", version = "~> 0.1" }
  }
}

variable "netpeer_endpoint" {
  type     = string
  default  = null # NETPEER_ENDPOINT
  nullable = true
}

variable "netpeer_token" {
  type      = string
  default   = null # NETPEER_TOKEN
  nullable  = true
  sensitive = true
}

provider "netpeer" {
  endpoint = var.netpeer_endpoint
  token    = var.netpeer_token
}

resource "netpeer_network" "b" {
  name        = "net-b"
  subnets     = ["10.2.0.0/24", "fd00:b::/64"]
  routes      = ["10.9.0.0/24 via 10.2.0.5"]
  description = "team B's network"
}

resource "netpeer_peering" "to_a" {
  network          = netpeer_network.b.name
  name             = "to-a"
  remote_namespace = "team-a"
  remote_network   = "net-a"
  description      = "team B consents to team A"
}

output "network_uid" { value = netpeer_network.b.uid }
output "phase" { value = netpeer_peering.to_a.phase }
output "remote_uid" { value = netpeer_peering.to_a.remote_uid }
