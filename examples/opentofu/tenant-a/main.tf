# Team A: a network, and team A's consent to peer it with team B's network.
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

variable "subnets" {
  type    = list(string)
  default = ["10.1.0.0/24", "fd00:a::/64"]
}

variable "remote_namespace" {
  type    = string
  default = "team-b"
}

variable "remote_network" {
  type    = string
  default = "net-b"
}

variable "description" {
  type    = string
  default = "team A consents to team B"
}

variable "wait_for_bound" {
  type    = string
  default = "0s" # e.g. "2m": the apply waits until B has consented too
}

provider "netpeer" {
  endpoint = var.netpeer_endpoint
  token    = var.netpeer_token
}

resource "netpeer_network" "a" {
  name        = "net-a"
  subnets     = var.subnets
  description = "team A's network"
}

resource "netpeer_peering" "to_b" {
  network          = netpeer_network.a.name # a reference: destroy withdraws the peering first
  name             = "to-b"
  remote_namespace = var.remote_namespace
  remote_network   = var.remote_network
  description      = var.description
  wait_for_bound   = var.wait_for_bound
}

# The network as the service sees it now, with the networks it is Bound to.
data "netpeer_network" "a" {
  name       = netpeer_network.a.name
  depends_on = [netpeer_peering.to_b]
}

output "network_uid" { value = netpeer_network.a.uid }
output "phase" { value = netpeer_peering.to_b.phase }
output "reason" { value = netpeer_peering.to_b.reason }
output "remote_uid" { value = netpeer_peering.to_b.remote_uid }
output "expires_at" { value = netpeer_peering.to_b.expires_at }
output "dataplane" { value = netpeer_peering.to_b.dataplane } # Programming while a chassis lags behind, else Programmed
output "programmed_at" { value = netpeer_peering.to_b.programmed_at }
output "peered_networks" { value = data.netpeer_network.a.peered_networks }
