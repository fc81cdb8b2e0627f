"""The store as its callers see it: the interface (``netpeer.store.interface``,
which the stores implement) and ``open_store``, which picks a store from the
configuration's ``store`` setting."""

from __future__ import annotations

from netpeer.store.interface import Store, Transaction, iter_all_networks

__all__ = ["Store", "Transaction", "iter_all_networks", "open_store", "is_url"]


def open_store(where, upgrade: bool = True, **options) -> Store:
    """The store a configuration names: a ``postgresql://`` URL, or the path
    of an SQLite file. ``options`` go to the PostgreSQL store only."""
    if is_url(where):
        try:
            from netpeer.store.postgres import PostgresStore
        except ImportError:
            from netpeer.errors import InvalidArgument
            raise InvalidArgument.for_field("store", "postgresql://...", "needs psycopg 3: pip install "
                                            "'netpeer[postgresql]'") from None
        return PostgresStore(str(where), upgrade=upgrade, **options)
    from netpeer.store.sqlite import SqliteStore
    return SqliteStore(where, upgrade=upgrade)


def is_url(where) -> bool:
    """Whether the ``store`` setting names a PostgreSQL database."""
    return isinstance(where, str) and where.startswith(("postgresql://", "postgres://"))
