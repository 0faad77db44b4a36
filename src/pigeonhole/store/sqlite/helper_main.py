"""The store helper process: writes each batch of effects to SQLite, then fdatasyncs.

Started by `StoreHelper` (store/sqlite/helper.py) as `python -m
pigeonhole.store.sqlite.helper_main CHANNEL_DB USAGE_DB`, after the server opened (and
migrated) both databases. Requests come on stdin, one at a time in order: a 4-byte
big-endian length, then that many bytes of JSON, a list of effects, each `[type name,
field values...]` (`encode_effects`). Each request is one transaction
(`SqliteStore.write`, `synchronous=NORMAL`) followed by an fdatasync of both write-ahead
logs (`SqliteStore.sync`): the durability of `synchronous=FULL`, as when the server
writes and syncs itself. Each request is answered on stdout: `k` once it is durable;
`e`, a 2-byte big-endian length and the reason (UTF-8) if the transaction was rolled
back or the sync failed (the reason also goes to stderr, the server's log). End of input
(the server closed the pipe, or died) ends the process; SIGINT, SIGTERM and SIGHUP do
not.
"""

from __future__ import annotations

import dataclasses
import signal
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from pigeonhole.protocol import effects as fx
from pigeonhole.store.sqlite.store import WRITABLE_EFFECTS, SqliteStore

HEADER = struct.Struct(">I")

_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in WRITABLE_EFFECTS
}
_BY_NAME: dict[str, type] = {cls.__name__: cls for cls in WRITABLE_EFFECTS}


def _as_list(effect: Any) -> list[Any]:
    cls = type(effect)
    return [cls.__name__, *[getattr(effect, name) for name in _FIELDS[cls]]]


def encode_effects(effects: list[fx.Effect]) -> bytes:
    """One request: the length header and the effects as JSON lists (no field names)."""
    body = orjson.dumps(effects, default=_as_list, option=orjson.OPT_PASSTHROUGH_DATACLASS)
    return HEADER.pack(len(body)) + body


def decode_effects(body: bytes) -> list[fx.Effect]:
    return [_BY_NAME[name](*values) for name, *values in orjson.loads(body)]


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def serve(store: SqliteStore, requests: BinaryIO, answers: BinaryIO) -> None:
    while True:
        header = _read_exactly(requests, HEADER.size)
        if header is None:
            return  # the server is gone
        (size,) = HEADER.unpack(header)
        body = _read_exactly(requests, size)
        if body is None:
            return
        answer = b"k"
        try:
            effects = decode_effects(body)
            if effects:
                store.write(effects)
            store.sync()
        except Exception as err:  # rolled back (or not synced): written again later
            print(f"pigeonhole store helper: {err}", file=sys.stderr, flush=True)
            reason = str(err).encode("utf-8", "replace")[:1000]
            answer = b"e" + len(reason).to_bytes(2, "big") + reason
        try:
            answers.write(answer)
            answers.flush()
        except BrokenPipeError:
            return


def main(argv: list[str]) -> None:
    # Ctrl-C in a terminal, or a service manager stopping the whole group, signals the
    # helper too; it must outlive the server's graceful stop (the last batches are
    # written then), and it ends anyway when the server's end of the pipe closes
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    channel, usage = argv
    store = SqliteStore(Path(channel), Path(usage))
    store.open()
    try:
        serve(store, sys.stdin.buffer, sys.stdout.buffer)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
