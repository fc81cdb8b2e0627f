"""The store interface, which every store implements: SQLite
(``netpeer.store.sqlite``) is the embedded default; PostgreSQL
(``netpeer.store.postgres``) lets several netpeerd replicas share one store.
Callers import it from ``netpeer.store.base``, with ``open_store``."""

from __future__ import annotations

import abc
import contextlib
from datetime import datetime
from typing import Collection, Iterator

from netpeer.core.models import Event, Network, NetworkKey, Peering, PeeringKey, Token
from netpeer.core.requests import PeeringRequest
from netpeer.core.sides import ItemKey, LinkState


class Transaction(abc.ABC):
    """A consistent view of the store; in a write transaction every put is
    visible to later reads and nothing is kept unless the block succeeds.
    Implements ``netpeer.core.consent.World``."""

    # networks
    @abc.abstractmethod
    def get_network(self, key: NetworkKey) -> Network | None: ...
    @abc.abstractmethod
    def get_network_by_uid(self, uid: str) -> Network | None: ...
    @abc.abstractmethod
    def list_networks(self, namespace: str | None, after: str = "", limit: int | None = None) -> list[Network]:
        """Networks of one namespace (all if None) ordered by name, after ``after``."""
    @abc.abstractmethod
    def network_uids(self) -> list[str]:
        """The uid of every network, unordered (no row read beyond it)."""
    @abc.abstractmethod
    def put_network(self, network: Network) -> None: ...
    @abc.abstractmethod
    def delete_network(self, key: NetworkKey) -> None: ...

    # peerings
    @abc.abstractmethod
    def get_peering(self, key: PeeringKey) -> Peering | None: ...
    @abc.abstractmethod
    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None: ...
    @abc.abstractmethod
    def peerings_of(self, network: NetworkKey, after: str = "", limit: int | None = None) -> list[Peering]: ...
    @abc.abstractmethod
    def peerings_towards(self, network: NetworkKey) -> list[Peering]: ...
    @abc.abstractmethod
    def put_peering(self, peering: Peering) -> None: ...
    @abc.abstractmethod
    def delete_peering(self, key: PeeringKey) -> None: ...
    @abc.abstractmethod
    def expired_peerings(self, now: datetime, limit: int = 500) -> list[Peering]:
        """Pending or Failed peerings whose ``expires_at`` is not after ``now``."""
    @abc.abstractmethod
    def failed_peerings_of(self, network: NetworkKey) -> list[Peering]:
        """The Failed peerings of ``network`` (a removal may let them bind)."""
    @abc.abstractmethod
    def bound_peerings_of(self, network: NetworkKey) -> list[Peering]:
        """The Bound peerings of ``network``."""

    # the request inbox (netpeer.core.requests; netpeer.store.requests_sql implements these)
    @abc.abstractmethod
    def peering_requests(self, namespace: str, network: str | None = None,
                         after: tuple[str, str, str, str] | None = None,
                         limit: int | None = None) -> list[PeeringRequest]:
        """The requests to networks of ``namespace`` (of ``network``) not
        dismissed, by (target network, requester namespace, network, half),
        after ``after``."""
    @abc.abstractmethod
    def request_dismissed(self, half: Peering) -> bool:
        """Whether the request half ``half`` makes was dismissed."""
    @abc.abstractmethod
    def dismiss_request(self, half: Peering, now: datetime) -> bool:
        """Dismisses the request half ``half`` makes; whether it was not yet."""

    # sites (netpeer.store.sites_sql implements these for every SQL store).
    # Keys with a ``site`` read the mirror of that site's halves and networks.
    @abc.abstractmethod
    def halves_to_site(self, site: str) -> list[Peering]:
        """This site's halves naming a network of ``site``."""
    @abc.abstractmethod
    def peering_sites(self) -> list[str]:
        """The other sites this site's halves name."""
    @abc.abstractmethod
    def has_peering_to_site(self, network: NetworkKey, site: str) -> bool: ...
    @abc.abstractmethod
    def mirror_of(self, site: str) -> tuple[list[tuple[Network, int | None]], list[Peering]]:
        """What ``site`` last told: its networks (with attachment slots) and halves."""
    @abc.abstractmethod
    def mirrored_sites(self) -> list[str]: ...
    @abc.abstractmethod
    def remote_attachment(self, site: str, uid: str) -> int | None: ...
    @abc.abstractmethod
    def attachment(self, network_uid: str, site: str) -> int | None: ...
    @abc.abstractmethod
    def attachments_of(self, network_uid: str) -> dict[str, int]: ...
    @abc.abstractmethod
    def attach(self, network_uid: str, site: str) -> int:
        """Attaches a network to the link with ``site``; its slot (idempotent)."""
    @abc.abstractmethod
    def release_attachment(self, network_uid: str, site: str) -> None: ...
    @abc.abstractmethod
    def attached_to(self, site: str) -> list[str]:
        """The uids of this site's networks attached to the link with ``site``."""
    @abc.abstractmethod
    def halves_of_to_site(self, network: NetworkKey, site: str) -> list[Peering]:
        """The halves of this site's ``network`` naming a network of ``site``."""
    @abc.abstractmethod
    def sites_of(self, network: NetworkKey) -> set[str]:
        """The sites ``network``'s halves name, and those told something of it."""
    @abc.abstractmethod
    def networks_towards(self, remote: NetworkKey) -> set[NetworkKey]:
        """This site's networks with a half naming ``remote`` (of another site)."""

    # what this site tells the others, item by item (netpeer.service.sitelog)
    @abc.abstractmethod
    def outbox_of(self, site: str, network: NetworkKey) -> dict[ItemKey, tuple[str | None, int, int]]: ...
    @abc.abstractmethod
    def outbox_put(self, site: str, key: ItemKey, value: str | None, h: int, seq: int) -> None: ...
    @abc.abstractmethod
    def outbox_since(self, site: str, since: int, limit: int) -> list[tuple[ItemKey, str | None, int]]: ...
    @abc.abstractmethod
    def outbox_live(self, site: str) -> list[tuple[ItemKey, str]]: ...
    @abc.abstractmethod
    def outbox_tombstones(self, site: str) -> list[int]: ...
    @abc.abstractmethod
    def outbox_prune(self, site: str, upto: int) -> int: ...
    @abc.abstractmethod
    def meta(self, key: str) -> str | None:
        """A record of the store's own (``put_meta``)."""
    @abc.abstractmethod
    def put_meta(self, key: str, value: str) -> None: ...
    @abc.abstractmethod
    def get_link(self, site: str) -> LinkState | None: ...
    @abc.abstractmethod
    def put_link(self, link: LinkState) -> None: ...
    @abc.abstractmethod
    def links(self) -> list[LinkState]: ...
    @abc.abstractmethod
    def mirror_hash(self, site: str, key: ItemKey) -> int | None: ...
    @abc.abstractmethod
    def mirror_put(self, site: str, item, h: int) -> None: ...
    @abc.abstractmethod
    def mirror_remove(self, site: str, key: ItemKey) -> None: ...
    @abc.abstractmethod
    def mirror_clear(self, site: str) -> None: ...
    @abc.abstractmethod
    def attachment_unused(self, network_uid: str, site: str, since: datetime) -> None:
        """Notes when the network's last half towards ``site`` went (kept if noted; ``attach`` clears it)."""
    @abc.abstractmethod
    def idle_attachments(self) -> list[tuple[str, str, datetime | None]]:
        """(network uid, site, unused since or None) of attachments with no half towards their site."""
    @abc.abstractmethod
    def count_attachments(self, namespace: str, site: str) -> int:
        """The slots the networks of ``namespace`` hold on the link with ``site``."""
    @abc.abstractmethod
    def attachment_use(self) -> dict[str, dict[str, int]]:
        """{site: {namespace: slots held on the link with that site}}."""

    @abc.abstractmethod
    def set_dataplane_cfg(self, network: NetworkKey, cfg: int, *, sites: Collection[str] | None = None,
                          newer_only: bool = False) -> list[PeeringKey]:
        """Marks the Bound peerings of ``network`` as waiting for ``cfg`` (no
        event: a Programmed one follows); their keys. ``sites``: only those
        towards these other sites. ``newer_only``: only those waiting for an
        older ``cfg`` or for the dataplane itself
        (``netpeer.core.dataplane.WAITS_FOR_DATAPLANE``), so that a mark made
        after another write's never takes a pair back to that write's."""
    @abc.abstractmethod
    def programming(self, up_to: int, limit: int = 500) -> list[Peering]:
        """Peerings waiting for a dataplane configuration at most ``up_to``."""
    @abc.abstractmethod
    def awaiting_dataplane(self) -> set[tuple[str, str]]:
        """(network uid, other site) of the Bound pairs marked
        ``WAITS_FOR_DATAPLANE``."""

    # events (Watch). A revision counts the changes of one namespace: what
    # another namespace does never moves it. The notifier alone follows the
    # order of all changes (a sequence, never shown to a caller).
    @abc.abstractmethod
    def events_after(self, namespace: str, network: str | None, revision: int, limit: int) -> list[Event]:
        """The changes of ``namespace`` (of one network's, with ``network``) after ``revision``, in order."""
    @abc.abstractmethod
    def namespaces_changed(self, after: int) -> tuple[int, set[str]]:
        """(the newest change's place in the sequence, namespaces with changes after place ``after``)."""
    @abc.abstractmethod
    def revisions(self, namespace: str) -> tuple[int, int]:
        """(oldest revision of ``namespace`` kept, its newest); oldest = newest + 1 when none is kept."""
    @abc.abstractmethod
    def prune_events(self, older_than: datetime, keep: int) -> int:
        """Drops events older than ``older_than`` beyond the newest ``keep``; how many."""

    # quotas
    @abc.abstractmethod
    def count_networks(self, namespace: str) -> int: ...
    @abc.abstractmethod
    def count_peerings_of(self, network: NetworkKey) -> int: ...
    @abc.abstractmethod
    def count_by_phase(self) -> dict[str, int]:
        """All peerings by phase (metrics)."""
    @abc.abstractmethod
    def count_pending(self, namespace: str) -> int:
        """Pending (or Failed) peerings of every network of ``namespace``."""

    # tokens
    @abc.abstractmethod
    def get_token(self, token_id: str) -> Token | None: ...
    @abc.abstractmethod
    def put_token(self, token: Token) -> None: ...
    @abc.abstractmethod
    def delete_token(self, token_id: str) -> bool:
        """Whether there was such a token."""
    @abc.abstractmethod
    def list_tokens(self) -> list[Token]: ...
    @abc.abstractmethod
    def count_tokens(self) -> int: ...

    # the store's place in the deployment (netpeer.service.epoch)
    @abc.abstractmethod
    def generation(self) -> int:
        """How many dataplane writes this store has committed."""
    @abc.abstractmethod
    def set_generation(self, generation: int) -> None: ...

    def savepoint(self) -> contextlib.AbstractContextManager[None]:
        """A nested scope inside a write transaction: if the block raises, only
        its own writes are undone. Only stores whose ``savepoints`` is true
        provide it; the service then commits concurrent writes together."""
        raise NotImplementedError


class Store(abc.ABC):
    #: Whether transactions offer ``savepoint()`` (the service then groups
    #: concurrent writes into one store transaction and one OVN transaction).
    savepoints = False
    #: Where the store lives, for messages (a path or a URL without password).
    where = ""

    @property
    @abc.abstractmethod
    def store_id(self) -> str:
        """A random id given to the store when it was created: a store
        replaced by a new one (a deleted file) has another."""

    @abc.abstractmethod
    def read(self) -> contextlib.AbstractContextManager[Transaction]: ...

    @abc.abstractmethod
    def write(self) -> contextlib.AbstractContextManager[Transaction]:
        """A write transaction: committed durably when the block exits
        normally, rolled back if it raises."""

    def exclusive(self) -> contextlib.AbstractContextManager[Transaction]:
        """A read during which no other process writes: the repair sweep
        reads the store and writes OVN inside one. A store used by one
        process only needs nothing more than ``read`` (that process's write
        lock is held around it); a shared one takes its write lock."""
        return self.read()

    @abc.abstractmethod
    def close(self) -> None: ...


def iter_all_networks(tx: Transaction, page: int = 1000) -> Iterator[Network]:
    after = ""
    while True:
        batch = tx.list_networks(None, after=after, limit=page)
        yield from batch
        if len(batch) < page:
            return
        after = f"{batch[-1].namespace}/{batch[-1].name}"
