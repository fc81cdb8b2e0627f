import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PHASE_UNSPECIFIED: _ClassVar[Phase]
    PENDING: _ClassVar[Phase]
    BOUND: _ClassVar[Phase]
    FAILED: _ClassVar[Phase]

class Dataplane(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATAPLANE_UNSPECIFIED: _ClassVar[Dataplane]
    PROGRAMMING: _ClassVar[Dataplane]
    PROGRAMMED: _ClassVar[Dataplane]
PHASE_UNSPECIFIED: Phase
PENDING: Phase
BOUND: Phase
FAILED: Phase
DATAPLANE_UNSPECIFIED: Dataplane
PROGRAMMING: Dataplane
PROGRAMMED: Dataplane

class Route(_message.Message):
    __slots__ = ("prefix", "next_hop")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    NEXT_HOP_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    next_hop: str
    def __init__(self, prefix: _Optional[str] = ..., next_hop: _Optional[str] = ...) -> None: ...

class NetworkPeeringStatus(_message.Message):
    __slots__ = ("name", "remote_namespace", "remote_network", "phase", "reason", "last_phase_transition_time", "remote_site")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REMOTE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_NETWORK_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_PHASE_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SITE_FIELD_NUMBER: _ClassVar[int]
    name: str
    remote_namespace: str
    remote_network: str
    phase: Phase
    reason: str
    last_phase_transition_time: _timestamp_pb2.Timestamp
    remote_site: str
    def __init__(self, name: _Optional[str] = ..., remote_namespace: _Optional[str] = ..., remote_network: _Optional[str] = ..., phase: _Optional[_Union[Phase, str]] = ..., reason: _Optional[str] = ..., last_phase_transition_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., remote_site: _Optional[str] = ...) -> None: ...

class PeeredNetwork(_message.Message):
    __slots__ = ("namespace", "name", "uid", "site", "prefixes")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    site: str
    prefixes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., site: _Optional[str] = ..., prefixes: _Optional[_Iterable[str]] = ...) -> None: ...

class Network(_message.Message):
    __slots__ = ("name", "uid", "subnets", "routes", "description", "peerings", "peered_networks", "create_time", "update_time", "etag", "peering_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    SUBNETS_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PEERINGS_FIELD_NUMBER: _ClassVar[int]
    PEERED_NETWORKS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    PEERING_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    uid: str
    subnets: _containers.RepeatedScalarFieldContainer[str]
    routes: _containers.RepeatedCompositeFieldContainer[Route]
    description: str
    peerings: _containers.RepeatedCompositeFieldContainer[NetworkPeeringStatus]
    peered_networks: _containers.RepeatedCompositeFieldContainer[PeeredNetwork]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    etag: str
    peering_count: int
    def __init__(self, name: _Optional[str] = ..., uid: _Optional[str] = ..., subnets: _Optional[_Iterable[str]] = ..., routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ..., description: _Optional[str] = ..., peerings: _Optional[_Iterable[_Union[NetworkPeeringStatus, _Mapping]]] = ..., peered_networks: _Optional[_Iterable[_Union[PeeredNetwork, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., etag: _Optional[str] = ..., peering_count: _Optional[int] = ...) -> None: ...

class RemoteRef(_message.Message):
    __slots__ = ("namespace", "network", "uid", "site")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    network: str
    uid: str
    site: str
    def __init__(self, namespace: _Optional[str] = ..., network: _Optional[str] = ..., uid: _Optional[str] = ..., site: _Optional[str] = ...) -> None: ...

class Peering(_message.Message):
    __slots__ = ("name", "remote", "description", "ttl", "phase", "reason", "message", "last_phase_transition_time", "expires_at", "remote_uid", "network_uid", "create_time", "etag", "dataplane", "programmed_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_PHASE_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_UID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_UID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    DATAPLANE_FIELD_NUMBER: _ClassVar[int]
    PROGRAMMED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    remote: RemoteRef
    description: str
    ttl: _duration_pb2.Duration
    phase: Phase
    reason: str
    message: str
    last_phase_transition_time: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    remote_uid: str
    network_uid: str
    create_time: _timestamp_pb2.Timestamp
    etag: str
    dataplane: Dataplane
    programmed_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., remote: _Optional[_Union[RemoteRef, _Mapping]] = ..., description: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., phase: _Optional[_Union[Phase, str]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., last_phase_transition_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., remote_uid: _Optional[str] = ..., network_uid: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., etag: _Optional[str] = ..., dataplane: _Optional[_Union[Dataplane, str]] = ..., programmed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("parent", "since_revision")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SINCE_REVISION_FIELD_NUMBER: _ClassVar[int]
    parent: str
    since_revision: int
    def __init__(self, parent: _Optional[str] = ..., since_revision: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("revision", "type", "time", "name", "network", "peering", "peering_request")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNSPECIFIED: _ClassVar[WatchEvent.Type]
        BOOKMARK: _ClassVar[WatchEvent.Type]
        CREATED: _ClassVar[WatchEvent.Type]
        UPDATED: _ClassVar[WatchEvent.Type]
        PHASE_CHANGED: _ClassVar[WatchEvent.Type]
        PROGRAMMED: _ClassVar[WatchEvent.Type]
        DELETED: _ClassVar[WatchEvent.Type]
    TYPE_UNSPECIFIED: WatchEvent.Type
    BOOKMARK: WatchEvent.Type
    CREATED: WatchEvent.Type
    UPDATED: WatchEvent.Type
    PHASE_CHANGED: WatchEvent.Type
    PROGRAMMED: WatchEvent.Type
    DELETED: WatchEvent.Type
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    PEERING_FIELD_NUMBER: _ClassVar[int]
    PEERING_REQUEST_FIELD_NUMBER: _ClassVar[int]
    revision: int
    type: WatchEvent.Type
    time: _timestamp_pb2.Timestamp
    name: str
    network: Network
    peering: Peering
    peering_request: PeeringRequest
    def __init__(self, revision: _Optional[int] = ..., type: _Optional[_Union[WatchEvent.Type, str]] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., name: _Optional[str] = ..., network: _Optional[_Union[Network, _Mapping]] = ..., peering: _Optional[_Union[Peering, _Mapping]] = ..., peering_request: _Optional[_Union[PeeringRequest, _Mapping]] = ...) -> None: ...

class PeeringRequest(_message.Message):
    __slots__ = ("name", "id", "requester", "requester_peering", "prefixes", "description", "create_time", "ttl", "expires_at", "pinned_uid")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_PEERING_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    PINNED_UID_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    requester: RemoteRef
    requester_peering: str
    prefixes: _containers.RepeatedScalarFieldContainer[str]
    description: str
    create_time: _timestamp_pb2.Timestamp
    ttl: _duration_pb2.Duration
    expires_at: _timestamp_pb2.Timestamp
    pinned_uid: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., requester: _Optional[_Union[RemoteRef, _Mapping]] = ..., requester_peering: _Optional[str] = ..., prefixes: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pinned_uid: _Optional[str] = ...) -> None: ...

class ListPeeringRequestsRequest(_message.Message):
    __slots__ = ("parent", "page_size", "page_token")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    parent: str
    page_size: int
    page_token: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPeeringRequestsResponse(_message.Message):
    __slots__ = ("requests", "next_page_token", "revision")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[PeeringRequest]
    next_page_token: str
    revision: int
    def __init__(self, requests: _Optional[_Iterable[_Union[PeeringRequest, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class DismissPeeringRequestRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class AcceptPeeringRequestRequest(_message.Message):
    __slots__ = ("name", "peering_id", "peering", "validate_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PEERING_ID_FIELD_NUMBER: _ClassVar[int]
    PEERING_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    peering_id: str
    peering: Peering
    validate_only: bool
    def __init__(self, name: _Optional[str] = ..., peering_id: _Optional[str] = ..., peering: _Optional[_Union[Peering, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateNetworkRequest(_message.Message):
    __slots__ = ("parent", "network_id", "network", "validate_only")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    parent: str
    network_id: str
    network: Network
    validate_only: bool
    def __init__(self, parent: _Optional[str] = ..., network_id: _Optional[str] = ..., network: _Optional[_Union[Network, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class GetNetworkRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListNetworksRequest(_message.Message):
    __slots__ = ("parent", "page_size", "page_token")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    parent: str
    page_size: int
    page_token: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListNetworksResponse(_message.Message):
    __slots__ = ("networks", "next_page_token", "revision")
    NETWORKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    networks: _containers.RepeatedCompositeFieldContainer[Network]
    next_page_token: str
    revision: int
    def __init__(self, networks: _Optional[_Iterable[_Union[Network, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class UpdateNetworkRequest(_message.Message):
    __slots__ = ("network", "update_mask", "validate_only")
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    network: Network
    update_mask: _field_mask_pb2.FieldMask
    validate_only: bool
    def __init__(self, network: _Optional[_Union[Network, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class DeleteNetworkRequest(_message.Message):
    __slots__ = ("name", "etag")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    etag: str
    def __init__(self, name: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class CreatePeeringRequest(_message.Message):
    __slots__ = ("parent", "peering_id", "peering", "validate_only")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PEERING_ID_FIELD_NUMBER: _ClassVar[int]
    PEERING_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    parent: str
    peering_id: str
    peering: Peering
    validate_only: bool
    def __init__(self, parent: _Optional[str] = ..., peering_id: _Optional[str] = ..., peering: _Optional[_Union[Peering, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class BatchCreatePeeringsRequest(_message.Message):
    __slots__ = ("requests", "validate_only")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[CreatePeeringRequest]
    validate_only: bool
    def __init__(self, requests: _Optional[_Iterable[_Union[CreatePeeringRequest, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class BatchCreatePeeringsResponse(_message.Message):
    __slots__ = ("peerings",)
    PEERINGS_FIELD_NUMBER: _ClassVar[int]
    peerings: _containers.RepeatedCompositeFieldContainer[Peering]
    def __init__(self, peerings: _Optional[_Iterable[_Union[Peering, _Mapping]]] = ...) -> None: ...

class GetPeeringRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListPeeringsRequest(_message.Message):
    __slots__ = ("parent", "page_size", "page_token")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    parent: str
    page_size: int
    page_token: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPeeringsResponse(_message.Message):
    __slots__ = ("peerings", "next_page_token", "revision")
    PEERINGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    peerings: _containers.RepeatedCompositeFieldContainer[Peering]
    next_page_token: str
    revision: int
    def __init__(self, peerings: _Optional[_Iterable[_Union[Peering, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class UpdatePeeringRequest(_message.Message):
    __slots__ = ("peering", "update_mask", "validate_only")
    PEERING_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    peering: Peering
    update_mask: _field_mask_pb2.FieldMask
    validate_only: bool
    def __init__(self, peering: _Optional[_Union[Peering, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class DeletePeeringRequest(_message.Message):
    __slots__ = ("name", "etag")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    etag: str
    def __init__(self, name: _Optional[str] = ..., etag: _Optional[str] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("namespaces", "description", "ttl")
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    description: str
    ttl: _duration_pb2.Duration
    def __init__(self, namespaces: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("token", "token_id", "namespaces", "expires_at")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    token: str
    token_id: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, token: _Optional[str] = ..., token_id: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TokenInfo(_message.Message):
    __slots__ = ("token_id", "namespaces", "admin", "description", "create_time", "expires_at")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    description: str
    create_time: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, token_id: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[TokenInfo]
    def __init__(self, tokens: _Optional[_Iterable[_Union[TokenInfo, _Mapping]]] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class GetCallerRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Caller(_message.Message):
    __slots__ = ("token_id", "namespaces", "admin")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    def __init__(self, token_id: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SweepReport(_message.Message):
    __slots__ = ("expired", "repaired_rows", "errors")
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_ROWS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    expired: int
    repaired_rows: int
    errors: int
    def __init__(self, expired: _Optional[int] = ..., repaired_rows: _Optional[int] = ..., errors: _Optional[int] = ...) -> None: ...

class ServerStatus(_message.Message):
    __slots__ = ("version", "dataplane_connected", "sweeps", "last_sweep", "last_sweep_start_time", "last_sweep_end_time", "sweep_totals", "site", "sites", "replica", "leader", "dataplane")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DATAPLANE_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    SWEEPS_FIELD_NUMBER: _ClassVar[int]
    LAST_SWEEP_FIELD_NUMBER: _ClassVar[int]
    LAST_SWEEP_START_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SWEEP_END_TIME_FIELD_NUMBER: _ClassVar[int]
    SWEEP_TOTALS_FIELD_NUMBER: _ClassVar[int]
    SITE_FIELD_NUMBER: _ClassVar[int]
    SITES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    DATAPLANE_FIELD_NUMBER: _ClassVar[int]
    version: str
    dataplane_connected: bool
    sweeps: int
    last_sweep: SweepReport
    last_sweep_start_time: _timestamp_pb2.Timestamp
    last_sweep_end_time: _timestamp_pb2.Timestamp
    sweep_totals: SweepReport
    site: str
    sites: _containers.RepeatedCompositeFieldContainer[SiteLinkStatus]
    replica: str
    leader: str
    dataplane: str
    def __init__(self, version: _Optional[str] = ..., dataplane_connected: _Optional[bool] = ..., sweeps: _Optional[int] = ..., last_sweep: _Optional[_Union[SweepReport, _Mapping]] = ..., last_sweep_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_sweep_end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sweep_totals: _Optional[_Union[SweepReport, _Mapping]] = ..., site: _Optional[str] = ..., sites: _Optional[_Iterable[_Union[SiteLinkStatus, _Mapping]]] = ..., replica: _Optional[str] = ..., leader: _Optional[str] = ..., dataplane: _Optional[str] = ...) -> None: ...

class SiteLinkStatus(_message.Message):
    __slots__ = ("site", "reachable", "last_ok_time", "last_error", "exchanges", "failures", "capacity", "slots_used", "top_namespaces", "bytes_sent", "bytes_received", "resyncs_sent", "resyncs_received", "pending_changes", "diverged", "items_told", "items_held")
    SITE_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    LAST_OK_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    EXCHANGES_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    SLOTS_USED_FIELD_NUMBER: _ClassVar[int]
    TOP_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    RESYNCS_SENT_FIELD_NUMBER: _ClassVar[int]
    RESYNCS_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PENDING_CHANGES_FIELD_NUMBER: _ClassVar[int]
    DIVERGED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_TOLD_FIELD_NUMBER: _ClassVar[int]
    ITEMS_HELD_FIELD_NUMBER: _ClassVar[int]
    site: str
    reachable: bool
    last_ok_time: _timestamp_pb2.Timestamp
    last_error: str
    exchanges: int
    failures: int
    capacity: int
    slots_used: int
    top_namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceSlots]
    bytes_sent: int
    bytes_received: int
    resyncs_sent: int
    resyncs_received: int
    pending_changes: int
    diverged: bool
    items_told: int
    items_held: int
    def __init__(self, site: _Optional[str] = ..., reachable: _Optional[bool] = ..., last_ok_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., exchanges: _Optional[int] = ..., failures: _Optional[int] = ..., capacity: _Optional[int] = ..., slots_used: _Optional[int] = ..., top_namespaces: _Optional[_Iterable[_Union[NamespaceSlots, _Mapping]]] = ..., bytes_sent: _Optional[int] = ..., bytes_received: _Optional[int] = ..., resyncs_sent: _Optional[int] = ..., resyncs_received: _Optional[int] = ..., pending_changes: _Optional[int] = ..., diverged: _Optional[bool] = ..., items_told: _Optional[int] = ..., items_held: _Optional[int] = ...) -> None: ...

class NamespaceSlots(_message.Message):
    __slots__ = ("namespace", "slots")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    slots: int
    def __init__(self, namespace: _Optional[str] = ..., slots: _Optional[int] = ...) -> None: ...

class SiteSync(_message.Message):
    __slots__ = ("site", "to_site", "delta", "ack_stream", "ack", "want_full")
    SITE_FIELD_NUMBER: _ClassVar[int]
    TO_SITE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ACK_STREAM_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    WANT_FULL_FIELD_NUMBER: _ClassVar[int]
    site: str
    to_site: str
    delta: SiteDelta
    ack_stream: str
    ack: int
    want_full: bool
    def __init__(self, site: _Optional[str] = ..., to_site: _Optional[str] = ..., delta: _Optional[_Union[SiteDelta, _Mapping]] = ..., ack_stream: _Optional[str] = ..., ack: _Optional[int] = ..., want_full: _Optional[bool] = ...) -> None: ...

class SiteDelta(_message.Message):
    __slots__ = ("stream", "since", "head", "full", "digest_count", "digest_xor", "networks", "halves", "removed")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    HEAD_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    DIGEST_COUNT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_XOR_FIELD_NUMBER: _ClassVar[int]
    NETWORKS_FIELD_NUMBER: _ClassVar[int]
    HALVES_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    stream: str
    since: int
    head: int
    full: bool
    digest_count: int
    digest_xor: bytes
    networks: _containers.RepeatedCompositeFieldContainer[SiteNetwork]
    halves: _containers.RepeatedCompositeFieldContainer[SiteHalf]
    removed: _containers.RepeatedCompositeFieldContainer[SiteItemRef]
    def __init__(self, stream: _Optional[str] = ..., since: _Optional[int] = ..., head: _Optional[int] = ..., full: _Optional[bool] = ..., digest_count: _Optional[int] = ..., digest_xor: _Optional[bytes] = ..., networks: _Optional[_Iterable[_Union[SiteNetwork, _Mapping]]] = ..., halves: _Optional[_Iterable[_Union[SiteHalf, _Mapping]]] = ..., removed: _Optional[_Iterable[_Union[SiteItemRef, _Mapping]]] = ...) -> None: ...

class SiteItemRef(_message.Message):
    __slots__ = ("kind", "namespace", "network", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    network: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., network: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SiteNetwork(_message.Message):
    __slots__ = ("namespace", "name", "uid", "prefixes", "attachment")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    uid: str
    prefixes: _containers.RepeatedScalarFieldContainer[str]
    attachment: int
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., prefixes: _Optional[_Iterable[str]] = ..., attachment: _Optional[int] = ...) -> None: ...

class SiteHalf(_message.Message):
    __slots__ = ("namespace", "network", "name", "remote_namespace", "remote_network", "network_uid", "remote_uid", "create_time", "phase", "conflicts", "ready")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REMOTE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REMOTE_NETWORK_FIELD_NUMBER: _ClassVar[int]
    NETWORK_UID_FIELD_NUMBER: _ClassVar[int]
    REMOTE_UID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    network: str
    name: str
    remote_namespace: str
    remote_network: str
    network_uid: str
    remote_uid: str
    create_time: _timestamp_pb2.Timestamp
    phase: Phase
    conflicts: _containers.RepeatedScalarFieldContainer[str]
    ready: bool
    def __init__(self, namespace: _Optional[str] = ..., network: _Optional[str] = ..., name: _Optional[str] = ..., remote_namespace: _Optional[str] = ..., remote_network: _Optional[str] = ..., network_uid: _Optional[str] = ..., remote_uid: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., phase: _Optional[_Union[Phase, str]] = ..., conflicts: _Optional[_Iterable[str]] = ..., ready: _Optional[bool] = ...) -> None: ...
