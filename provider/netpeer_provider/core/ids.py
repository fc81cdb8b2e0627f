"""Resource ids: the service's resource names, used as state ids and import ids.

``namespaces/NS/networks/NET`` and ``namespaces/NS/networks/NET/peerings/NAME``
are built and parsed here only.
"""

from __future__ import annotations

import dataclasses

from netpeer_provider.core.errors import InvalidId


@dataclasses.dataclass(frozen=True)
class NetworkId:
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "NetworkId":
        parts = str(text).split("/")
        if len(parts) != 4 or parts[0] != "namespaces" or parts[2] != "networks":
            raise InvalidId(f"id: {text!r} is not a network id (namespaces/NS/networks/NAME)", path="id")
        return cls(parts[1], parts[3])

    def __str__(self) -> str:
        return f"namespaces/{self.namespace}/networks/{self.name}"


@dataclasses.dataclass(frozen=True)
class PeeringId:
    namespace: str
    network: str
    name: str

    @classmethod
    def parse(cls, text: str) -> "PeeringId":
        parts = str(text).split("/")
        if len(parts) != 6 or parts[0] != "namespaces" or parts[2] != "networks" or parts[4] != "peerings":
            raise InvalidId(f"id: {text!r} is not a peering id (namespaces/NS/networks/NETWORK/peerings/NAME)",
                            path="id")
        return cls(parts[1], parts[3], parts[5])

    def __str__(self) -> str:
        return f"namespaces/{self.namespace}/networks/{self.network}/peerings/{self.name}"

    @property
    def network_id(self) -> NetworkId:
        return NetworkId(self.namespace, self.network)
