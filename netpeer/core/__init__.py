"""The pure core of netpeer: domain types, validation, consent matching and the
OVN rows a set of networks and peerings should produce. Nothing here does I/O
or imports grpc or pulumi, or speaks OVSDB."""
