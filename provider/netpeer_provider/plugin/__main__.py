"""``python -m netpeer_provider.plugin ENGINE_ADDRESS``: what ``pulumi-resource-netpeer`` runs."""

from netpeer_provider.plugin import main

main()
