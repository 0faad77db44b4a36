"""The archive's bounds: bytes per client and in all, its own free-disk threshold.

A real archive app on 127.0.0.1 with a real SQLite file; every post comes from
127.0.0.1, one client. Refused envelopes are listed in the receipt with status-go's
envelope-error form (hash, code 2, a description that says why) and counted by reason.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from pigeonhole.archive import errors
from pigeonhole.archive.client import ArchiveClient
from pigeonhole.archive.envelopes import Envelope
from pigeonhole.archive.packets import EnvelopeError
from pigeonhole.archive.quota import ArchiveQuota
from pigeonhole.archive.store import ArchiveStore
from tests.archive.archive_support import T0, RunArchive

TOPIC = bytes.fromhex("1f7ea17f")
DATA = 1000  # bytes of data per envelope


def envelope(tag: int, created: int = T0, ttl: int = 10_000) -> Envelope:
    data = tag.to_bytes(4, "big") + bytes(DATA - 4)
    return Envelope(expiry=created + ttl, ttl=ttl, topic=TOPIC, data=data, nonce=0)


SIZE = len(envelope(0).rlp)


async def post(url: str, envelopes: Sequence[Envelope]) -> list[EnvelopeError]:
    async with ArchiveClient.connect(url) as client:
        return await client.post(envelopes)


def stored_owners(path: object) -> list[str | None]:
    with sqlite3.connect(str(path)) as db:
        return [row[0] for row in db.execute("SELECT owner FROM envelopes")]


def test_quota_accounting() -> None:
    quota = ArchiveQuota(max_bytes_per_address=100, max_bytes=150)
    assert quota.reserve("a", 60) is None
    refused = quota.reserve("a", 60)
    assert refused is not None and refused.message == errors.ADDRESS_QUOTA
    assert quota.reserve("b", 60) is None
    refused = quota.reserve("c", 60)
    assert refused is not None and refused.message == errors.SERVER_QUOTA
    assert (quota.total, dict(quota.bytes_by)) == (120, {"a": 60, "b": 60})
    quota.refund("a", 60)
    assert (quota.total, dict(quota.bytes_by)) == (60, {"b": 60})
    assert quota.reserve("", 80) is None  # nobody's: the total only
    assert dict(quota.bytes_by) == {"b": 60}


async def test_one_client_is_refused_at_its_quota(run_archive: RunArchive) -> None:
    async with run_archive(max_bytes_per_address=3 * SIZE) as live:
        batch = [envelope(i) for i in range(5)]
        refused = await post(live.url, batch)
        assert [(e.hash, e.code, e.description) for e in refused] == [
            (batch[3].hash, errors.CODE_OTHER, errors.ADDRESS_QUOTA),
            (batch[4].hash, errors.CODE_OTHER, errors.ADDRESS_QUOTA),
        ]
        assert live.service.store.count() == 3
        assert live.service.quota.bytes_by == {"127.0.0.1": 3 * SIZE}
        assert live.service.metrics.refused_envelopes == {"address_quota": 2}
        figures = live.service.figures()
        assert (figures["stored_bytes"], figures["addresses"]) == (3 * SIZE, 1)


async def test_the_archive_total_is_bounded(run_archive: RunArchive) -> None:
    async with run_archive(max_bytes=2 * SIZE, max_bytes_per_address=0) as live:
        refused = await post(live.url, [envelope(i) for i in range(3)])
        assert [e.description for e in refused] == [errors.SERVER_QUOTA]
        assert live.service.metrics.refused_envelopes == {"server_quota": 1}


async def test_duplicates_hold_nothing_new(run_archive: RunArchive) -> None:
    async with run_archive(max_bytes_per_address=2 * SIZE) as live:
        once = envelope(1)
        for _ in range(4):
            assert await post(live.url, [once]) == []
        assert live.service.quota.total == SIZE
        assert await post(live.url, [envelope(2)]) == []


async def test_quota_is_rebuilt_on_restart(run_archive: RunArchive) -> None:
    async with run_archive(max_bytes_per_address=2 * SIZE) as live:
        assert await post(live.url, [envelope(1), envelope(2)]) == []
        path = live.config.archive_db
    assert stored_owners(path) == ["127.0.0.1", "127.0.0.1"]
    async with run_archive(max_bytes_per_address=2 * SIZE) as live:
        refused = await post(live.url, [envelope(3)])
        assert [e.description for e in refused] == [errors.ADDRESS_QUOTA]


async def test_retention_gives_the_quota_back(run_archive: RunArchive) -> None:
    old = [envelope(i, created=T0 - 2 * 86400, ttl=3 * 86400) for i in range(2)]
    quota = sum(len(e.rlp) for e in old)
    async with run_archive(max_bytes_per_address=quota, retention_days=1) as live:
        assert await post(live.url, old) == []
        assert [e.description for e in await post(live.url, [envelope(9)])] == [
            errors.ADDRESS_QUOTA
        ]
        assert await live.service.run_retention() == 2
        assert live.service.quota.total == 0
        assert await post(live.url, [envelope(9)]) == []


async def test_below_its_disk_threshold_the_archive_stores_nothing(
    run_archive: RunArchive,
) -> None:
    async with run_archive(min_disk_free=1 << 62) as live:  # more than any disk has free
        refused = await post(live.url, [envelope(1)])
        assert [e.description for e in refused] == [errors.DISK_LOW]
        assert live.service.store.count() == 0
        assert live.service.quota.total == 0


async def test_blur_usage_stores_no_owner(run_archive: RunArchive) -> None:
    async with run_archive(store_owners=False, max_bytes_per_address=SIZE) as live:
        assert await post(live.url, [envelope(1)]) == []
        refused = await post(live.url, [envelope(2)])  # still counted, in memory
        assert [e.description for e in refused] == [errors.ADDRESS_QUOTA]
        path = live.config.archive_db
    assert stored_owners(path) == [None]


async def test_a_version_1_archive_is_upgraded_in_place(run_archive: RunArchive) -> None:
    async with run_archive() as live:
        path = live.config.archive_db
    with sqlite3.connect(str(path)) as db:  # as version 1 made it: no owner column
        db.executescript(
            "DROP TABLE envelopes; UPDATE version SET version = 1;"
            "CREATE TABLE envelopes (key BLOB PRIMARY KEY NOT NULL, rlp BLOB NOT NULL)"
            " WITHOUT ROWID;"
        )
        db.execute("INSERT INTO envelopes VALUES (?, ?)", (b"k" * 40, b"x" * 500))
    async with run_archive() as live:
        assert live.service.quota.total == 500
        assert not live.service.quota.bytes_by  # nobody's
        assert await post(live.url, [envelope(1)]) == []
    store = ArchiveStore(path)
    store.open()
    try:
        assert store.count() == 2
    finally:
        store.close()
