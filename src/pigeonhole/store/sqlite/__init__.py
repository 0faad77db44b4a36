"""The SQLite store (the default): channel.sqlite and usage.sqlite in `--data-dir`.

store.py writes effects (one write, one transaction) and reads bodies for replays,
migrations.py creates, checks and upgrades the files (schema/*.sql), helper.py and
helper_main.py run the helper process that writes and fdatasyncs each batch.
"""

from pigeonhole.store.sqlite.store import (
    CHANNEL_VERSION,
    USAGE_VERSION,
    WRITABLE_EFFECTS,
    BodyReader,
    SqliteStore,
)

__all__ = ["CHANNEL_VERSION", "USAGE_VERSION", "WRITABLE_EFFECTS", "BodyReader", "SqliteStore"]
