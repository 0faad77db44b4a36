"""A 300 MiB file from the CLI to the page is streamed to disk, and one from the page to the
CLI is read in slices as it is sent (and hashed from a read of its own): the tab holds
neither.

While the bytes flow, `Runtime.getHeapUsage` of every target of the page's origin (the
tab, its transit worker that opens the records, and the service worker that answers the
download) is sampled through DevTools; its
backing-store size counts the bytes of ArrayBuffers (`Performance.getMetrics` does not:
a tab holding a 300 MiB file showed 13 MB there, and ~345 MB here). Two figures:

- the peak as sampled, garbage not yet collected included (the service worker detaches
  each chunk once the download has it; the transit worker's records wait for V8's
  collector; a sending page reuses its buffers): it must stay below a third of the file
  (a tab holding the file passes the whole file's size);
- what the tab and worker hold right after a forced collection (every 8th sample): the
  few MiB in flight, below a tenth of the file.

The received file must be the source, byte for byte, and the relay must have carried it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.relay import ServedRelay, wait_for_happy
from tests.web.web_support import (
    MIB,
    Cli,
    HeapPeak,
    HeapProbe,
    WebPage,
    heap_probe,
    random_file,
    sha256_file,
)

FILE_SIZE = 300 * MIB
#: the sampled peak of the tab and its worker together, garbage included
PEAK_LIMIT = FILE_SIZE // 3
#: what they may hold after a forced collection
HELD_LIMIT = FILE_SIZE // 10
#: often enough for 10 samples while 300 MiB pass in 3 s
SAMPLE_EVERY = 0.05
TIMEOUT = 240.0

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def check_memory(what: str, before: int, peak: HeapPeak, peak_limit: int, held_limit: int) -> None:
    """Print what the page held during a transfer (`what`), and hold it to the limits."""
    held, by_target = max(peak.held), peak.peak_by_target
    print(
        f"\n# 300 MiB {what}: peak JS heap + backing store {peak.peak_total / MIB:.1f} MiB"
        f" over {peak.samples} samples (before {before / MIB:.1f} MiB; per target "
        + ", ".join(f"{k.split()[0]} {v / MIB:.1f} MiB" for k, v in sorted(by_target.items()))
        + f"); held after a forced collection at most {held / MIB:.1f} MiB"
        f" ({len(peak.held)} collections); samples in MiB: {[round(x / MIB) for x in peak.series]}"
    )
    assert peak.samples >= 10, "too few samples to say what the page held"
    assert peak.peak_total < peak_limit, (
        f"the page peaked at {peak.peak_total / MIB:.0f} MiB: {peak.last}"
    )
    assert held < held_limit, f"the page held {held / MIB:.0f} MiB after a collection"


@pytest.fixture
def probe(base_url: str, debug_port: int) -> Iterator[HeapProbe]:
    with heap_probe(debug_port, base_url) as sampling:
        yield sampling


@pytest.fixture
def large(cli: Cli, tmp_path: Path) -> Path:
    """The 300 MiB file, and the CLI given the time it takes."""
    cli.timeout = TIMEOUT
    return random_file(tmp_path / "source", FILE_SIZE, name="three-hundred.bin")


def until_done(web_page: WebPage, probe: HeapProbe) -> HeapPeak:
    return probe.sample_until(lambda: web_page.state() in ("done", "failed"), SAMPLE_EVERY, TIMEOUT)


@pytest.mark.timeout(TIMEOUT + 60)
def test_web_e2e_large_download_streams_to_disk(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, probe: HeapProbe, large: Path
) -> None:
    source, since = large, len(web_server.records())
    sender = cli.send(str(source))
    web_page.enter_code(sender.wait_code())
    before = probe.sample()
    download = web_page.accept_offer(timeout=60)
    peak = until_done(web_page, probe)
    assert web_page.state() == "done", web_page.message()
    assert any(k.startswith("service_worker") for k in peak.peak_by_target), (
        f"the service worker that streams the download was never sampled: {peak.last}"
    )
    check_memory("CLI -> page", before, peak, PEAK_LIMIT, HELD_LIMIT)
    sender.check(60)
    got = download.path()
    assert got is not None and Path(got).stat().st_size == FILE_SIZE
    assert sha256_file(Path(got)) == sha256_file(source)
    wait_for_happy(web_server.records, since, FILE_SIZE)


@pytest.mark.timeout(TIMEOUT + 60)
def test_web_e2e_large_upload_is_read_as_it_is_sent(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, probe: HeapProbe, large: Path
) -> None:
    source, since = large, len(web_server.records())
    before = probe.sample()
    receiver = cli.receive(web_page.send_file(source), file=True)
    peak = until_done(web_page, probe)
    assert web_page.state() == "done", web_page.message()
    check_memory("page -> CLI", before, peak, PEAK_LIMIT, HELD_LIMIT)
    receiver.check(60)
    assert sha256_file(receiver.received) == sha256_file(source)
    wait_for_happy(web_server.records, since, FILE_SIZE)
