"""Where the page's policy allows no WebAssembly (an operator's proxy that serves a stricter
Content-Security-Policy, say), the page falls back to @noble's plain JS: a 10 MiB file each
way with the `wormhole` CLI, its records sealed and opened by @noble/ciphers, and the
file's SHA-256 (which each side's ack check compares) by @noble/hashes.

The browser of this module rewrites the CSP of the page and of its transit worker's script
(a worker has its own policy) to the served one without `'wasm-unsafe-eval'`. Responses made
up by the browser this way come from no address, so its Local Network Access checks would
block the page's loopback mailbox: this module's browser runs with them off.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pigeonhole.web.serving import CSP
from tests.support.relay import ServedRelay, wait_for_happy
from tests.web.web_support import (
    MIB,
    ROUTED_FLAGS,
    Cli,
    WebPage,
    chromium,
    random_file,
    serve_worker_probe,
    sha256_file,
)

FILE_SIZE = 10 * MIB
STRICT = CSP.replace(" 'wasm-unsafe-eval'", "")
#: the page itself and its transit worker's script: the two documents with a policy
POLICED = re.compile(r"^https?://[^/]+/(\?[^#]*)?$|/web/transit-worker\.js$")
#: the smallest WebAssembly module: compiling it is what the policy allows or refuses
EMPTY_MODULE = "new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0])"

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser(downloads_dir: Path, debug_port: int) -> Iterator[Any]:
    with chromium(downloads_dir, debug_port, ROUTED_FLAGS) as b:
        yield b


@pytest.fixture
def served() -> list[str | None]:
    """The policies the server sent for the documents the browser rewrote."""
    return []


@pytest.fixture
def context(browser: Any, served: list[str | None]) -> Iterator[Any]:
    ctx = browser.new_context(accept_downloads=True)

    def stricter_headers(headers: dict[str, str]) -> dict[str, str]:
        served.append(headers.get("content-security-policy"))
        return {**headers, "content-security-policy": STRICT}

    def stricter(route: Any) -> None:
        if route.request.url.endswith("/web/transit-worker.js"):  # its test build, which
            serve_worker_probe(route, stricter_headers)  # says which box sealed
            return
        response = route.fetch()
        route.fulfill(response=response, headers=stricter_headers(response.headers))

    ctx.route(POLICED, stricter)
    try:
        yield ctx
    finally:
        ctx.close()


def compiles(where: Any) -> bool:
    """Whether `where` (the page, or a worker) may compile WebAssembly."""
    return bool(
        where.evaluate(f"WebAssembly.compile({EMPTY_MODULE}).then(() => true, () => false)")
    )


def test_web_e2e_no_wasm_falls_back_both_ways(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, served: list[str | None], tmp_path: Path
) -> None:
    assert STRICT != CSP and "wasm" not in STRICT
    assert served[:1] == [CSP], f"the page's policy, as served, was not the one rewritten: {served}"
    assert not compiles(web_page.page), "the stricter policy did not reach the page"
    source = random_file(tmp_path / "source", FILE_SIZE, name="plain.bin")
    since = len(web_server.records())
    receiver = cli.receive(web_page.send_file(source), file=True)
    receiver.check()
    web_page.wait_state("done", timeout=60)
    assert sha256_file(receiver.received) == sha256_file(source)
    # (the worker is surely there once a transfer went through it)
    assert not compiles(web_page.transit_worker()), "the policy did not reach the worker"
    assert served == [CSP, CSP], f"the page's and the worker's policies, as served: {served}"
    assert web_page.transit_box() == "@noble/ciphers"
    sender = cli.send(str(source))
    got = web_page.receive_file(sender.wait_code(), tmp_path / "got")
    sender.check()
    assert sha256_file(got) == sha256_file(source)
    carried = web_page.transit_carried()  # the file each way, and the page's ack record
    assert carried["received"] == FILE_SIZE and FILE_SIZE < carried["sent"] < FILE_SIZE + 200
    wait_for_happy(web_server.records, since, FILE_SIZE)
