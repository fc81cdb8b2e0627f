"""The one description of netpeer's resources and provider settings.

Every face derives its engine's schema from this module (the Pulumi
``schema.json``, the OpenTofu provider schema) and the core's own rules read
it too: which fields replace a resource and which update in place, which
are required, which inputs the outputs echo and which outputs are the
service's status, which are secret, where an input's declared value is kept
in the outputs. Names are snake_case; faces convert them (``camel_case``
below) when their engine wants another spelling.

Walk it with ``RESOURCES`` / ``PROVIDER``, ``Resource.inputs()``,
``Resource.outputs()`` (and ``replacing``, ``updatable``, ``echoed``,
``status``) and ``Type.fields`` for nested objects.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Iterator


class Kind(enum.Enum):
    STRING = "string"
    NUMBER = "number"
    BOOL = "boolean"
    LIST = "list"
    OBJECT = "object"


class Role(enum.Enum):
    """How a field travels between the user, the engine and the service."""

    REQUIRED = "required"                    # input the user must give; echoed in the outputs
    OPTIONAL = "optional"                    # input the user may give; echoed in the outputs
    OPTIONAL_COMPUTED = "optional+computed"  # input the user may give; the output says what the service holds
    COMPUTED = "computed"                    # output only, set by the service
    INPUT_ONLY = "input-only"                # input only; an output of the same name, if any, is another field

    @property
    def is_input(self) -> bool:
        return self is not Role.COMPUTED

    @property
    def is_output(self) -> bool:
        return self is not Role.INPUT_ONLY

    @property
    def required(self) -> bool:
        return self is Role.REQUIRED


@dataclasses.dataclass(frozen=True)
class Type:
    """A field's type: a scalar, a list of ``items``, or an object of ``fields``."""

    kind: Kind
    items: "Type | None" = None
    fields: tuple["Field", ...] = ()
    name: str | None = None  # objects: a type name the faces may use (PeeringStatus, ...)

    def __str__(self) -> str:
        if self.kind is Kind.LIST:
            return f"list[{self.items}]"
        if self.kind is Kind.OBJECT:
            return self.name or "object"
        return self.kind.value


STRING = Type(Kind.STRING)
NUMBER = Type(Kind.NUMBER)
BOOL = Type(Kind.BOOL)


def list_of(items: Type) -> Type:
    return Type(Kind.LIST, items=items)


def object_of(name: str, *fields: "Field") -> Type:
    return Type(Kind.OBJECT, fields=tuple(fields), name=name)


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a resource, of a nested object or of the provider settings."""

    name: str
    type: Type
    role: Role
    description: str
    replaces: bool = False      # a change makes it another object: replace, not update in place
    secret: bool = False        # never shown in plans or logs; stored encrypted by engines that can
    default: Any = None         # what an absent input means (documentation and generated schemas)
    declared_as: str | None = None  # the output that keeps the value as declared, when the output of
    #                                 this name shows the service's view instead (diffs compare with it)
    env: str | None = None      # provider settings: the environment variable read when unset
    internal: bool = False      # bookkeeping output of the provider, not meant for programs

    def __post_init__(self) -> None:
        assert self.name == self.name.lower() and " " not in self.name, self.name
        assert self.description and self.description[-1] == ".", f"{self.name}: describe it in a sentence"


@dataclasses.dataclass(frozen=True)
class Resource:
    """A resource type: its name (``Network``), what it is, its id form, its fields."""

    name: str
    description: str
    id_format: str
    fields: tuple[Field, ...]

    def field(self, name: str, *, output: bool = False) -> Field:
        """The field called ``name`` (the output one when ``output`` and the name has two)."""
        matches = [f for f in self.fields if f.name == name]
        if output:
            matches = [f for f in matches if f.role.is_output] or matches
        else:
            matches = [f for f in matches if f.role.is_input] or matches
        if not matches:
            raise KeyError(f"{self.name} has no field {name!r}")
        return matches[0]

    def inputs(self) -> Iterator[Field]:
        return (f for f in self.fields if f.role.is_input)

    def outputs(self) -> Iterator[Field]:
        return (f for f in self.fields if f.role.is_output)

    def replacing(self) -> tuple[Field, ...]:
        """The inputs whose change replaces the resource, in the order diffs report them."""
        return tuple(f for f in self.inputs() if f.replaces)

    def updatable(self) -> tuple[Field, ...]:
        """The inputs whose change updates the resource in place, in the order diffs report them."""
        return tuple(f for f in self.inputs() if not f.replaces)

    def echoed(self) -> tuple[Field, ...]:
        """The inputs repeated in the output of the same name (as given, or as
        the service holds them for ``OPTIONAL_COMPUTED``); not those whose
        declared value is kept under another output (``declared_as``)."""
        return tuple(f for f in self.inputs() if f.role.is_output and f.declared_as is None)

    def status(self) -> tuple[Field, ...]:
        """The outputs only the service sets (``COMPUTED``), bookkeeping ones left out."""
        return tuple(f for f in self.outputs() if f.role is Role.COMPUTED and not f.internal)


def camel_case(name: str) -> str:
    """``remote_network`` -> ``remoteNetwork`` (Pulumi's property names)."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_OPT, _REQ, _OC, _OUT = Role.OPTIONAL, Role.REQUIRED, Role.OPTIONAL_COMPUTED, Role.COMPUTED

_NS_HELP = "Defaults to the namespace of the token when it grants exactly one."
_REASONS = ("`AwaitingRemote`, `Bound`, `OverlappingPrefixes`, `RemoteWithdrawn` or `RemoteReplaced` (the remote "
            "network was deleted and re-created while this peering is pinned to the old one's uid).")
_DATAPLANE_HELP = ("`Programming` while the last change of the pair's dataplane (binding, unbinding, new prefixes) "
                   "has not reached every OVN chassis (the dataplane lags), else `Programmed`; Bound and "
                   "`Programmed`: traffic flows.")
_PROGRAMMED_HELP = ("When the last change of the pair's dataplane reached every OVN chassis (RFC 3339, UTC); unset "
                    "while Programming or before any change.")
_PIN_HELP = ("Pins the remote network's uid: the peering binds only to that network. Changing or clearing it "
             "re-pins the peering in place, e.g. to the new uid after the remote network was re-created "
             "(reason `RemoteReplaced`).")
_SITE_HELP = ("The site of the remote network when it is in another site (1-10 lower-case letters and digits, "
              "starting with a letter); empty for this site.")
_TTL_HELP = ("How long the peering may stay Pending or Failed before the service deletes it: "
             "seconds or a duration like `90s`, `12h`, `7d` (1s to 365d).")

INLINE_PEERING = object_of(
    "InlinePeering",
    Field("name", STRING, _REQ, "The peering's name, unique in its network."),
    Field("remote_network", STRING, _REQ, "The name of the network to peer with."),
    Field("remote_namespace", STRING, _OPT, "The remote network's namespace; defaults to this network's."),
    Field("remote_site", STRING, _OPT, _SITE_HELP + " Changing it withdraws the peering and declares it anew."),
    Field("remote_uid", STRING, _OPT, _PIN_HELP),
    Field("ttl", STRING, _OPT, _TTL_HELP, default="7d"),
    Field("description", STRING, _OPT, "Free text about the peering.", default=""),
)

PEERING_STATUS = object_of(
    "PeeringStatus",
    Field("name", STRING, _OUT, "The peering's name."),
    Field("remote_namespace", STRING, _OUT, "The remote network's namespace."),
    Field("remote_network", STRING, _OUT, "The remote network's name."),
    Field("remote_site", STRING, _OUT, "The remote network's site; empty when it is in this site."),
    Field("phase", STRING, _OUT, "`Pending`, `Bound` or `Failed`."),
    Field("reason", STRING, _OUT, "Why it is in that phase: " + _REASONS),
    Field("remote_uid", STRING, _OUT, "The remote network's uid, pinned or learned when the peering bound."),
    Field("last_phase_transition_time", STRING, _OUT, "When the phase last changed (RFC 3339, UTC)."),
    Field("expires_at", STRING, _OUT, "When a Pending or Failed peering will be deleted; unset while Bound."),
    Field("dataplane", STRING, _OUT, _DATAPLANE_HELP),
    Field("programmed_at", STRING, _OUT, _PROGRAMMED_HELP),
)

PEERED_NETWORK = object_of(
    "PeeredNetwork",
    Field("namespace", STRING, _OUT, "The peered network's namespace."),
    Field("name", STRING, _OUT, "The peered network's name."),
    Field("uid", STRING, _OUT, "The peered network's uid."),
    Field("site", STRING, _OUT, "The peered network's site; empty when it is in this site."),
    Field("prefixes", list_of(STRING), _OUT, "The peered network's prefixes (subnets and routes) as this "
          "network's side sees them."),
)

NETWORK = Resource(
    "Network",
    "A virtual network: IPv4 and IPv6 subnets on one OVN logical switch behind one router, in a namespace. "
    "Changing its name or namespace replaces it; subnets, routes, description and inline peerings update in "
    "place.",
    "namespaces/{namespace}/networks/{name}",
    (
        # name before namespace: the order diffs list replacing fields in.
        Field("name", STRING, _OC, "The network's name: 1-63 letters, digits and dashes, starting with a letter. "
              "Defaults to the resource's name in the program.",
              replaces=True),
        Field("namespace", STRING, _OC, "The namespace that owns the network. " + _NS_HELP, replaces=True),
        Field("subnets", list_of(STRING), _REQ, "The network's CIDR prefixes, e.g. `10.1.0.0/24`, `fd00:1::/64`; "
              "at most 16, no host bits, no overlap."),
        Field("routes", list_of(STRING), _OPT, "Extra prefixes reachable inside the network and exported to "
              "peers: `10.9.0.0/24` or `10.9.0.0/24 via 10.1.0.5` (the next hop inside a subnet).", default=[]),
        Field("description", STRING, _OPT, "Free text about the network.", default=""),
        Field("peerings", list_of(INLINE_PEERING), Role.INPUT_ONLY, "Peerings declared with the network; created, "
              "updated and withdrawn with it. A peering is declared either here or as a NetworkPeering, not both.",
              default=[], declared_as="inline_peerings"),
        Field("uid", STRING, _OUT, "Assigned by the service; the network's OVN objects are named from it."),
        Field("peerings", list_of(PEERING_STATUS), _OUT, "Every peering of the network (inline or not) with its "
              "phase and reason, as of the network's last create, update or refresh: a peering declared as its "
              "own resource binds after the network was written, so refresh (`up --refresh`) to see it here."),
        Field("inline_peerings", list_of(INLINE_PEERING), _OUT, "The inline peerings as last declared, sorted by "
              "name; what the next diff compares with.", internal=True),
        Field("peered_networks", list_of(PEERED_NETWORK), _OUT, "The networks this one is Bound to, as of the "
              "network's last create, update or refresh (like `peerings`)."),
    ),
)

NETWORK_PEERING = Resource(
    "NetworkPeering",
    "One side's consent to peer its network with another network. It is Pending until the other side "
    "declares the matching half, then Bound (traffic flows), or Failed when prefixes overlap. The answer is "
    "the same whether the remote network exists or not: if it stays Pending, check the names on both sides. "
    "Changing the network, name, namespace or remote (its site included) replaces it; description, ttl and "
    "remote_uid update in place. A Failed peering is reported as a warning (or an error, with `error_on_not_bound`).",
    "namespaces/{namespace}/networks/{network}/peerings/{name}",
    (
        Field("namespace", STRING, _OC, "The namespace of the local network. " + _NS_HELP, replaces=True),
        Field("network", STRING, _REQ, "The local network's name.", replaces=True),
        Field("name", STRING, _OC, "The peering's name, unique in its network (not `internal` or `external`). "
              "Defaults to the resource's name in the program.",
              replaces=True),
        Field("remote_namespace", STRING, _OC, "The remote network's namespace; defaults to this peering's.",
              replaces=True),
        Field("remote_network", STRING, _REQ, "The name of the network to peer with.", replaces=True),
        Field("remote_site", STRING, _OPT, _SITE_HELP, replaces=True, default=""),
        Field("remote_uid", STRING, _OC, _PIN_HELP + " The output is the pinned uid, or the one learned when "
              "the peering bound.", declared_as="pinned_remote_uid"),
        Field("ttl", STRING, _OC, _TTL_HELP + " The output is normalised (`168h` shows as `7d`).", default="7d"),
        Field("description", STRING, _OPT, "Free text about the peering.", default=""),
        Field("wait_for_bound", NUMBER, _OPT, "Seconds a create or update waits for the peering to be Bound "
              "(0 to 3600), showing its phase while it waits; it stops at once if the peering is Failed. If it is "
              "not Bound in time the peering stays (it binds when the other side consents) and the operation "
              "warns, or fails if the provider setting `error_on_not_bound` is true. 0 does not wait. A setting "
              "of the provider; the service never sees it.", default=0),
        Field("wait_for_programmed", BOOL, _OPT, "With `wait_for_bound`, wait also until the peering's "
              "dataplane is `Programmed` (every OVN chassis has applied it, so traffic flows), not only until it is "
              "Bound; if it is Bound but still `Programming` in time, the operation warns. A setting of the "
              "provider.", default=False),
        Field("phase", STRING, _OUT, "`Pending`, `Bound` or `Failed`."),
        Field("reason", STRING, _OUT, "Why it is in that phase: " + _REASONS),
        Field("message", STRING, _OUT, "A sentence about the phase, for people."),
        Field("network_uid", STRING, _OUT, "The local network's uid."),
        Field("last_phase_transition_time", STRING, _OUT, "When the phase last changed (RFC 3339, UTC)."),
        Field("expires_at", STRING, _OUT, "When a Pending or Failed peering will be deleted; unset while Bound."),
        Field("dataplane", STRING, _OUT, _DATAPLANE_HELP),
        Field("programmed_at", STRING, _OUT, _PROGRAMMED_HELP),
        Field("pinned_remote_uid", STRING, _OUT, "The remote_uid input as last declared; what the next diff "
              "compares with.", internal=True),
    ),
)

PROVIDER = Resource(
    "Provider",
    "How to reach netpeerd and who the caller is. Each setting falls back to its environment variable.",
    "",
    (
        Field("endpoint", STRING, _OPT, "netpeerd's address: `host:port` or `unix:///path/netpeer.sock`.",
              env="NETPEER_ENDPOINT"),
        Field("token", STRING, _OPT, "The API token (`np_...`); it grants the namespaces the provider may manage.",
              secret=True, env="NETPEER_TOKEN"),
        Field("ca_cert", STRING, _OPT, "A CA certificate (file path or PEM text) to verify netpeerd; enables TLS.",
              env="NETPEER_CA_CERT"),
        Field("client_cert", STRING, _OPT, "A client certificate (file path or PEM text) for mutual TLS.",
              env="NETPEER_CLIENT_CERT"),
        Field("client_key", STRING, _OPT, "The client certificate's private key (file path or PEM text).",
              secret=True, env="NETPEER_CLIENT_KEY"),
        Field("error_on_not_bound", BOOL, _OPT, "When true, a create or update that leaves a peering Failed, or "
              "still not Bound after its `wait_for_bound`, fails (the peering is kept and recorded either way); "
              "when false (the default), it warns.", default=False, env="NETPEER_ERROR_ON_NOT_BOUND"),
    ),
)

RESOURCES: dict[str, Resource] = {r.name: r for r in (NETWORK, NETWORK_PEERING)}


@dataclasses.dataclass(frozen=True)
class Function:
    """A read-only lookup the faces offer (a Pulumi function, an OpenTofu data
    source): its arguments, and a result with the outputs of ``result``."""

    name: str
    description: str
    arguments: tuple[Field, ...]
    result: Resource

    def outputs(self) -> tuple[Field, ...]:
        """The result's fields: the resource's outputs, bookkeeping ones left out."""
        return tuple(f for f in self.result.outputs() if not f.internal)


GET_NETWORK = Function(
    "getNetwork",
    "Reads an existing network of a namespace the token grants: its uid, subnets, routes, peerings and the "
    "networks it is Bound to.",
    (Field("name", STRING, _REQ, "The network's name."),
     Field("namespace", STRING, _OPT, "The network's namespace. " + _NS_HELP)),
    NETWORK,
)

FUNCTIONS: dict[str, Function] = {f.name: f for f in (GET_NETWORK,)}
