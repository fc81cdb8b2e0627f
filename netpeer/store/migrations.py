"""The store's schema, as numbered migrations.

A store records the last migration applied (``meta.schema_version``). At
start netpeerd applies the missing ones in order, each in its own
transaction under the store's write lock (``netpeer db upgrade`` does the
same without serving), and refuses a store whose version is newer than it
knows: an older binary must not write a newer schema. Each migration has
its statements per SQL dialect; a migration is never edited once released,
only followed by another.
"""

from __future__ import annotations

import dataclasses

from netpeer.errors import FailedPrecondition
from netpeer.reasons import Reason


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    what: str
    sqlite: tuple[str, ...]
    postgresql: tuple[str, ...] = ()


# Migration 4's new tables, alike in both dialects (netpeer.store.sites_sql).
_SITE_TABLES = (
    """CREATE TABLE IF NOT EXISTS remote_networks (
        site TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL,
        prefixes TEXT NOT NULL, attachment INTEGER,
        PRIMARY KEY (site, namespace, name))""",
    "CREATE INDEX IF NOT EXISTS remote_networks_by_uid ON remote_networks (site, uid)",
    """CREATE TABLE IF NOT EXISTS remote_halves (
        site TEXT NOT NULL, namespace TEXT NOT NULL, network TEXT NOT NULL, name TEXT NOT NULL,
        remote_namespace TEXT NOT NULL, remote_network TEXT NOT NULL, network_uid TEXT NOT NULL,
        remote_uid TEXT NOT NULL, create_time BIGINT NOT NULL, phase TEXT NOT NULL, conflicts TEXT NOT NULL,
        ready INTEGER NOT NULL,
        PRIMARY KEY (site, namespace, network, name))""",
    "CREATE INDEX IF NOT EXISTS remote_halves_to ON remote_halves (site, namespace, network, remote_namespace, "
    "remote_network)",
    """CREATE TABLE IF NOT EXISTS attachments (
        network_uid TEXT NOT NULL, site TEXT NOT NULL, idx INTEGER NOT NULL,
        PRIMARY KEY (network_uid, site), UNIQUE (site, idx))""",
)

# Cross-site changes instead of whole sides (docs/cross-site.md, "How consent
# crosses sites"): what this site tells each other one, item by item with a
# sequence number (removals kept as tombstones until acknowledged), each
# link's numbering and digests, and the hash of every mirrored item.
_SITE_LOG = (
    """CREATE TABLE IF NOT EXISTS site_outbox (
        site TEXT NOT NULL, namespace TEXT NOT NULL, network TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
        value TEXT, hash TEXT NOT NULL, seq BIGINT NOT NULL,
        PRIMARY KEY (site, namespace, network, kind, name))""",
    "CREATE INDEX IF NOT EXISTS site_outbox_by_seq ON site_outbox (site, seq)",
    "CREATE INDEX IF NOT EXISTS site_outbox_by_network ON site_outbox (namespace, network)",
    "CREATE INDEX IF NOT EXISTS site_outbox_removed ON site_outbox (site, seq) WHERE value IS NULL",
    """CREATE TABLE IF NOT EXISTS site_links (
        site TEXT PRIMARY KEY, stream TEXT NOT NULL, head BIGINT NOT NULL, horizon BIGINT NOT NULL,
        out_count BIGINT NOT NULL, out_xor TEXT NOT NULL, peer_stream TEXT NOT NULL, peer_ack BIGINT NOT NULL,
        in_stream TEXT NOT NULL, in_seq BIGINT NOT NULL, mirror_count BIGINT NOT NULL, mirror_xor TEXT NOT NULL,
        resyncs_received BIGINT NOT NULL,
        reachable INTEGER NOT NULL, last_ok BIGINT, last_error TEXT NOT NULL)""",
    "ALTER TABLE remote_networks ADD COLUMN hash TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE remote_halves ADD COLUMN hash TEXT NOT NULL DEFAULT ''",
)

# A link's released slots below its highest taken one (``sites_sql.attach``):
# the lowest free slot is then two index look-ups, not a read of every slot.
# A store from before gets the gaps it has.
_FREE_SLOTS = (
    """CREATE TABLE IF NOT EXISTS attachment_free (
        site TEXT NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY (site, idx))""",
    """WITH RECURSIVE slots (site, idx, top) AS (
        SELECT site, 0, MAX(idx) FROM attachments GROUP BY site
        UNION ALL SELECT site, idx + 1, top FROM slots WHERE idx + 1 < top)
       INSERT INTO attachment_free (site, idx)
       SELECT site, idx FROM slots s WHERE s.idx < s.top
       AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.site = s.site AND a.idx = s.idx)""",
)

# The request inbox (netpeer.core.requests): what a target dismissed, per
# target network and requester half (a half made again is a new request).
_DISMISSALS = (
    """CREATE TABLE IF NOT EXISTS request_dismissals (
        namespace TEXT NOT NULL, network TEXT NOT NULL, requester_namespace TEXT NOT NULL,
        requester_network TEXT NOT NULL, requester_name TEXT NOT NULL, requester_uid TEXT NOT NULL,
        requester_create_time BIGINT NOT NULL, time BIGINT NOT NULL,
        PRIMARY KEY (namespace, network, requester_namespace, requester_network, requester_name, requester_uid,
                     requester_create_time))""",
    "CREATE INDEX IF NOT EXISTS request_dismissals_by_half ON request_dismissals "
    "(requester_namespace, requester_network, requester_name)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "networks, peerings, tokens", sqlite=(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS networks (
            namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL UNIQUE,
            subnets TEXT NOT NULL, routes TEXT NOT NULL, description TEXT NOT NULL,
            create_time INTEGER NOT NULL, update_time INTEGER NOT NULL, revision INTEGER NOT NULL,
            PRIMARY KEY (namespace, name))""",
        """CREATE TABLE IF NOT EXISTS peerings (
            namespace TEXT NOT NULL, network TEXT NOT NULL, name TEXT NOT NULL,
            remote_namespace TEXT NOT NULL, remote_network TEXT NOT NULL,
            network_uid TEXT NOT NULL, remote_uid TEXT,
            ttl_seconds INTEGER NOT NULL, description TEXT NOT NULL,
            phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
            last_transition INTEGER NOT NULL, expires_at INTEGER,
            create_time INTEGER NOT NULL, revision INTEGER NOT NULL,
            PRIMARY KEY (namespace, network, name),
            UNIQUE (namespace, network, remote_namespace, remote_network))""",
        "CREATE INDEX IF NOT EXISTS peerings_by_remote ON peerings (remote_namespace, remote_network)",
        "CREATE INDEX IF NOT EXISTS peerings_by_expiry ON peerings (expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS tokens (
            token_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, namespaces TEXT NOT NULL,
            admin INTEGER NOT NULL, description TEXT NOT NULL, create_time INTEGER NOT NULL)""",
    ), postgresql=(
        # Times are microseconds since the epoch (BIGINT), lists JSON text: the
        # same values as in SQLite, so both stores answer alike.
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS networks (
            namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL UNIQUE,
            subnets TEXT NOT NULL, routes TEXT NOT NULL, description TEXT NOT NULL,
            create_time BIGINT NOT NULL, update_time BIGINT NOT NULL, revision BIGINT NOT NULL,
            PRIMARY KEY (namespace, name))""",
        """CREATE TABLE IF NOT EXISTS peerings (
            namespace TEXT NOT NULL, network TEXT NOT NULL, name TEXT NOT NULL,
            remote_namespace TEXT NOT NULL, remote_network TEXT NOT NULL,
            network_uid TEXT NOT NULL, remote_uid TEXT,
            ttl_seconds BIGINT NOT NULL, description TEXT NOT NULL,
            phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
            last_transition BIGINT NOT NULL, expires_at BIGINT,
            create_time BIGINT NOT NULL, revision BIGINT NOT NULL,
            PRIMARY KEY (namespace, network, name),
            UNIQUE (namespace, network, remote_namespace, remote_network))""",
        "CREATE INDEX IF NOT EXISTS peerings_by_remote ON peerings (remote_namespace, remote_network)",
        "CREATE INDEX IF NOT EXISTS peerings_by_expiry ON peerings (expires_at) WHERE expires_at IS NOT NULL",
        """CREATE TABLE IF NOT EXISTS tokens (
            token_id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, namespaces TEXT NOT NULL,
            admin INTEGER NOT NULL, description TEXT NOT NULL, create_time BIGINT NOT NULL)""",
        # Replicas only: which replica sweeps (netpeer.service.leader), until when.
        """CREATE TABLE IF NOT EXISTS leases (
            name TEXT PRIMARY KEY, holder TEXT NOT NULL, term BIGINT NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL)""",
    )),
    Migration(2, "token expiry; pending peerings by namespace; the store's identity and generation", sqlite=(
        "ALTER TABLE tokens ADD COLUMN expires_at INTEGER",
        "CREATE INDEX IF NOT EXISTS peerings_by_phase ON peerings (namespace, network, phase, name)",
        "INSERT OR IGNORE INTO meta VALUES ('store_id', lower(hex(randomblob(16))))",
        "INSERT OR IGNORE INTO meta VALUES ('generation', '0')",
    ), postgresql=(
        "ALTER TABLE tokens ADD COLUMN IF NOT EXISTS expires_at BIGINT",
        "CREATE INDEX IF NOT EXISTS peerings_by_phase ON peerings (namespace, network, phase, name)",
        "INSERT INTO meta VALUES ('store_id', replace(gen_random_uuid()::text, '-', '')) ON CONFLICT DO NOTHING",
        "INSERT INTO meta VALUES ('generation', '0') ON CONFLICT DO NOTHING",
    )),
    Migration(3, "events for Watch; when a peering's dataplane change reached the chassis", sqlite=(
        """CREATE TABLE IF NOT EXISTS events (
            revision INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, namespace TEXT NOT NULL,
            network TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS events_by_namespace ON events (namespace, revision)",
        "ALTER TABLE peerings ADD COLUMN dataplane_cfg INTEGER",
        "ALTER TABLE peerings ADD COLUMN programmed_at INTEGER",
        "CREATE INDEX IF NOT EXISTS peerings_programming ON peerings (dataplane_cfg) WHERE programmed_at IS NULL",
    ), postgresql=(
        # Revisions are taken under the replicas' write lock, so they are
        # assigned in commit order (a reader never sees n+1 before n).
        """CREATE TABLE IF NOT EXISTS events (
            revision BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, time BIGINT NOT NULL,
            namespace TEXT NOT NULL, network TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
            type TEXT NOT NULL, body TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS events_by_namespace ON events (namespace, revision)",
        "ALTER TABLE peerings ADD COLUMN IF NOT EXISTS dataplane_cfg BIGINT",
        "ALTER TABLE peerings ADD COLUMN IF NOT EXISTS programmed_at BIGINT",
        "CREATE INDEX IF NOT EXISTS peerings_programming ON peerings (dataplane_cfg) WHERE programmed_at IS NULL",
    )),
    Migration(4, "sites: a peering's remote site and conflicts; the mirror of other sites' halves; attachments",
              sqlite=(
        # SQLite cannot change a table's UNIQUE constraint: the table is
        # rebuilt, with one remote network per (site, namespace, name).
        """CREATE TABLE peerings_v4 (
            namespace TEXT NOT NULL, network TEXT NOT NULL, name TEXT NOT NULL,
            remote_namespace TEXT NOT NULL, remote_network TEXT NOT NULL,
            network_uid TEXT NOT NULL, remote_uid TEXT,
            ttl_seconds INTEGER NOT NULL, description TEXT NOT NULL,
            phase TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
            last_transition INTEGER NOT NULL, expires_at INTEGER,
            create_time INTEGER NOT NULL, revision INTEGER NOT NULL,
            dataplane_cfg INTEGER, programmed_at INTEGER,
            remote_site TEXT NOT NULL DEFAULT '', conflicts TEXT NOT NULL DEFAULT '[]',
            PRIMARY KEY (namespace, network, name),
            UNIQUE (namespace, network, remote_site, remote_namespace, remote_network))""",
        """INSERT INTO peerings_v4 (namespace, network, name, remote_namespace, remote_network, network_uid,
            remote_uid, ttl_seconds, description, phase, reason, message, last_transition, expires_at, create_time,
            revision, dataplane_cfg, programmed_at)
           SELECT namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, ttl_seconds,
            description, phase, reason, message, last_transition, expires_at, create_time, revision, dataplane_cfg,
            programmed_at FROM peerings""",
        "DROP TABLE peerings",
        "ALTER TABLE peerings_v4 RENAME TO peerings",
        "CREATE INDEX peerings_by_remote ON peerings (remote_namespace, remote_network, remote_site)",
        "CREATE INDEX peerings_by_expiry ON peerings (expires_at) WHERE expires_at IS NOT NULL",
        "CREATE INDEX peerings_by_phase ON peerings (namespace, network, phase, name)",
        "CREATE INDEX peerings_programming ON peerings (dataplane_cfg) WHERE programmed_at IS NULL",
        "CREATE INDEX peerings_by_site ON peerings (remote_site) WHERE remote_site != ''",
        *_SITE_TABLES,
    ), postgresql=(
        "ALTER TABLE peerings ADD COLUMN IF NOT EXISTS remote_site TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE peerings ADD COLUMN IF NOT EXISTS conflicts TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE peerings DROP CONSTRAINT IF EXISTS peerings_namespace_network_remote_namespace_remote_network_key",
        "ALTER TABLE peerings ADD CONSTRAINT peerings_remote_key "
        "UNIQUE (namespace, network, remote_site, remote_namespace, remote_network)",
        "DROP INDEX IF EXISTS peerings_by_remote",
        "CREATE INDEX peerings_by_remote ON peerings (remote_namespace, remote_network, remote_site)",
        "CREATE INDEX peerings_by_site ON peerings (remote_site) WHERE remote_site != ''",
        *_SITE_TABLES,
    )),
    Migration(5, "since when an attachment to a site link has had no half towards that site",
              sqlite=("ALTER TABLE attachments ADD COLUMN unused_since INTEGER",),
              postgresql=("ALTER TABLE attachments ADD COLUMN IF NOT EXISTS unused_since BIGINT",)),
    # Revisions per namespace: the one a tenant sees counts its namespace's
    # changes only (a global one let it count everyone else's writes). The
    # global one stays, as the order the watch notifier follows. Kept events
    # keep the revisions clients saw (each namespace's still increase), so
    # a watch resumes across the upgrade; from then on every namespace
    # counts on from the newest revision of the time (revision_base).
    Migration(6, "Watch revisions per namespace", sqlite=(
        "ALTER TABLE events ADD COLUMN ns_revision INTEGER NOT NULL DEFAULT 0",
        "UPDATE events SET ns_revision = revision",
        "DROP INDEX IF EXISTS events_by_namespace",
        "CREATE INDEX IF NOT EXISTS events_by_namespace_revision ON events (namespace, ns_revision)",
        "CREATE TABLE IF NOT EXISTS namespace_revisions (namespace TEXT PRIMARY KEY, revision INTEGER NOT NULL)",
        "INSERT OR REPLACE INTO meta VALUES ('revision_base', "
        "CAST(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='events'), 0) AS TEXT))",
    ), postgresql=(
        # No default: an older replica still running fails its writes
        # instead of recording events without a revision.
        "ALTER TABLE events ADD COLUMN IF NOT EXISTS ns_revision BIGINT",
        "UPDATE events SET ns_revision = revision",
        "ALTER TABLE events ALTER COLUMN ns_revision SET NOT NULL",
        "DROP INDEX IF EXISTS events_by_namespace",
        "CREATE INDEX IF NOT EXISTS events_by_namespace_revision ON events (namespace, ns_revision)",
        "CREATE TABLE IF NOT EXISTS namespace_revisions (namespace TEXT PRIMARY KEY, revision BIGINT NOT NULL)",
        "INSERT INTO meta VALUES ('revision_base', (SELECT COALESCE(max(revision), "
        "(SELECT CAST(value AS BIGINT) FROM meta WHERE key='events_head'), 0) FROM events)::text) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
    )),
    Migration(7, "sites: changes told item by item; each link's numbering and digests", sqlite=_SITE_LOG,
              postgresql=_SITE_LOG),
    Migration(8, "sites: a link's free slots", sqlite=_FREE_SLOTS, postgresql=_FREE_SLOTS),
    Migration(9, "the request inbox: dismissed requests", sqlite=_DISMISSALS, postgresql=_DISMISSALS),
)

LATEST = MIGRATIONS[-1].version


def pending(current: int, where: str) -> list[Migration]:
    """The migrations a store at ``current`` needs; refuses a newer store."""
    if current > LATEST:
        raise FailedPrecondition(
            f"store {where} has schema version {current}; this netpeer understands up to {LATEST}: "
            "run a newer netpeer (or restore a backup made by this version)", field="store", value=where,
                                 reason=Reason.STORE_INCOMPATIBLE)
    return [m for m in MIGRATIONS if m.version > current]
