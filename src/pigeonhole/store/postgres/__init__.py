"""The PostgreSQL store: one database shared by any number of nodes (`--store URL`).

store.py holds the connections and the SQL a node runs, schema.py creates and upgrades
the schema (schema/*.sql), encoding.py and parts.py turn a batch's effects into the JSON
`channel.apply_batch` takes, shared.py decides a batch on the rows it locked and loaded.
"""

from pigeonhole.store.postgres.encoding import encode_batch, encode_effects, encode_rows
from pigeonhole.store.postgres.schema import POSTGRES_VERSION, schema_sql
from pigeonhole.store.postgres.store import PostgresStore

__all__ = [
    "POSTGRES_VERSION",
    "PostgresStore",
    "encode_batch",
    "encode_effects",
    "encode_rows",
    "schema_sql",
]
