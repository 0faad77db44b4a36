"""An archive flood cannot starve the mailbox: refused at its quotas and its own disk floor.

`pigeonhole serve` runs on a small real filesystem (a tmpfs of its own). Posters reach
the archive through the trusted loopback proxy (X-Real-IP), as they would behind one:
one address, then many addresses of one IPv6 /64, are each refused at the per-client
quota with receipts that say why; then many /64s flood until the archive stops at its
own free-disk threshold, far above the mailbox's watermark. Meanwhile a real `wormhole`
transfer with a large text body (over the mailbox's low-disk body limit) completes and
`/health` stays 200: the archive never pushed the mailbox into its low-disk mode.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pigeonhole.archive import errors
from pigeonhole.archive.client import ArchiveClient
from pigeonhole.archive.envelopes import Envelope
from tests.abuse.abuse_support import get, metrics_url, running_server, transfer
from tests.support.tmpfs import MiB, free_bytes, small_tmpfs

pytestmark = pytest.mark.interop

DISK = 128 * MiB
WATERMARK = 16 * MiB  # the mailbox's
ARCHIVE_FLOOR = 64 * MiB  # the archive's own, well above it
PER_CLIENT = 4 * MiB
DATA = 512 * 1024 - 100  # bytes of data per envelope: 8 envelopes fit in one quota
#: the most envelopes the disk flood may post before the floor must have stopped it
MAX_FLOOD = 400
#: a text whose message body (100 KB) is far above the low-disk limit of 16 KiB
BIG_TEXT = "x" * 100_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int, Path]]:
    with small_tmpfs(tmp_path / "disk", DISK) as disk:
        options = [
            f"--disk-free-watermark={WATERMARK}",
            f"--archive-disk-free={ARCHIVE_FLOOR}",
            f"--archive-max-bytes-per-address={PER_CLIENT}",
            "--archive-min-pow=0",  # the flood's speed is not what is tested
        ]
        with running_server(disk / "data", *options) as (url, pid):
            yield url, pid, disk


def envelope() -> Envelope:
    now = int(time.time())
    data = secrets.token_bytes(DATA)
    return Envelope(expiry=now + 3600, ttl=3600, topic=b"\x0f\x10\x0d\x00", data=data, nonce=0)


async def post_one(url: str, address: str) -> str | None:
    """Post one envelope from `address`; None when archived, else the receipt's reason."""
    async with ArchiveClient.connect(url, headers={"X-Real-IP": address}) as client:
        refused = await client.post([envelope()])
    assert len(refused) <= 1
    if refused:
        assert refused[0].code == errors.CODE_OTHER
        return refused[0].description
    return None


def health(url: str) -> str:
    return get(url.replace("ws://", "http://").replace("/v1", "/health"))


def archive_url(url: str) -> str:
    return url.replace("/v1", "/whisper/v6")


async def test_archive_flood_is_bounded(server: tuple[str, int, Path]) -> None:
    url, _, disk = server
    archive = archive_url(url)
    # one address: refused at its quota, connection after connection
    one = [await post_one(archive, "2001:db8:aa:1::1") for _ in range(12)]
    assert one == [None] * 8 + [errors.ADDRESS_QUOTA] * 4
    # many addresses of one /64: one client, one quota
    many = [await post_one(archive, f"2001:db8:aa:2::{n:x}") for n in range(1, 13)]
    assert many == [None] * 8 + [errors.ADDRESS_QUOTA] * 4
    # an IPv4 client beside them is not affected
    assert await post_one(archive, "192.0.2.10") is None

    async def flood() -> list[str | None]:
        """Fresh /64s until the archive's floor refuses (bounded: MAX_FLOOD posts)."""
        reasons: list[str | None] = []
        for n in range(MAX_FLOOD):
            reasons.append(await post_one(archive, f"2001:db8:bb:{n // 8:x}::1"))
            if reasons[-1] is not None:
                break
        return reasons

    reasons, (sent, received, text) = await asyncio.gather(flood(), transfer(url, BIG_TEXT))
    assert reasons[-1] == errors.DISK_LOW, reasons[-5:]
    assert all(r is None for r in reasons[:-1])
    assert (sent, received, text) == (0, 0, BIG_TEXT)
    assert free_bytes(disk) > WATERMARK + 16 * MiB
    assert health(url).strip() == "ok"
    # the mailbox still takes a large body after the flood
    assert await transfer(url, BIG_TEXT) == (0, 0, BIG_TEXT)
    metrics = get(metrics_url(url))
    refused = dict(
        re.findall(r'pigeonhole_archive_refused_envelopes_total\{reason="(\w+)"\} (\d+)', metrics)
    )
    assert int(refused["address_quota"]) == 8
    assert int(refused["disk_low"]) >= 1
    assert "pigeonhole_disk_low 0" in metrics
