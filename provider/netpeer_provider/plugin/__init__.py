"""``pulumi-resource-netpeer``: netpeer's Pulumi resource provider plugin, for
programs in any Pulumi language (YAML, TypeScript, Go, ...).

A third face over ``netpeer_provider.core``, beside the Python dynamic
providers: the package ``netpeer`` with ``netpeer:index:Network``,
``netpeer:index:NetworkPeering`` and the function ``netpeer:index:getNetwork``, its schema generated from the core's
(``schema_json``), served with Pulumi's provider server
(``pulumi.provider.experimental``). Only translation lives here: property
values and camelCase names (``values``), the engine's requests to core
calls (``provider``), failures to one-line statuses (``server``).

    pulumi-resource-netpeer ENGINE_ADDRESS     # as the Pulumi engine starts it
    python -m netpeer_provider.plugin ENGINE_ADDRESS

Settings: ``netpeer:endpoint``, ``netpeer:token`` (secret), ``netpeer:caCert``,
``netpeer:clientCert``, ``netpeer:clientKey``, ``netpeer:errorOnNotBound``, or
their ``NETPEER_*`` environment variables.
"""

from __future__ import annotations


def main() -> None:
    """Serves the plugin (imports Pulumi only when run)."""
    from netpeer_provider.plugin.server import main as serve
    serve()
