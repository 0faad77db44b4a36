"""Shared fixtures for the interop tests with the real wormhole clients.

One transit relay, one client namespace (when `unshare` works; set
PIGEONHOLE_INTEROP_NETNS=0 to run the clients directly on the host's loopback)
and one Pigeonhole server serve the whole session; the restart tests start
servers of their own. The tests that force clients through Pigeonhole's relay get
it from `relay` and put each side in a namespace of its own (`split_nets`).
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.interop import Harness
from tests.support.interop_servers import RelayPort, Server, TransitRelay
from tests.support.netns import Forwarder, Net, NetNS
from tests.support.relay import ServedRelay, SplitNets
from tests.support.wormhole_clients import WORMHOLE, Codes


@pytest.fixture(scope="session")
def interop_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interop")


@pytest.fixture(scope="session")
def codes() -> Codes:
    return Codes()


@pytest.fixture(scope="session")
def net(interop_dir: Path) -> Iterator[Net]:
    if not WORMHOLE.exists():
        pytest.skip(f"the Python wormhole client is not installed ({WORMHOLE})")
    relay = TransitRelay(interop_dir)
    forwarder: Forwarder | None = None
    netns: NetNS | None = None
    reason = ""
    if os.environ.get("PIGEONHOLE_INTEROP_NETNS", "1") == "0":
        reason = "PIGEONHOLE_INTEROP_NETNS=0"
    elif shutil.which("unshare") is None or shutil.which("nsenter") is None:
        reason = "unshare/nsenter (util-linux) not found"
    else:
        try:
            netns = NetNS(interop_dir)
            forwarder = Forwarder()
        except OSError as exc:
            reason = f"cannot create a network namespace: {exc}"
    if netns is None:
        print(f"# interop: clients run on the host's loopback ({reason})", file=sys.stderr)
    try:
        yield Net(relay, forwarder, netns, reason)
    finally:
        if netns is not None:
            netns.close()
        if forwarder is not None:
            forwarder.close()
        relay.close()


@pytest.fixture(scope="session")
def server(interop_dir: Path) -> Iterator[Server]:
    srv = Server(interop_dir / "server-data", interop_dir / "server.log")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(signal.SIGTERM)


@pytest.fixture
def harness(net: Net, server: Server, codes: Codes, tmp_path: Path) -> Harness:
    return Harness(net, server, tmp_path, codes)


@pytest.fixture(scope="session")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedRelay]:
    """Pigeonhole's transit relay on the host's loopback, as `pigeonhole serve` hosts it:
    `host`, `port`, and `records()` (its usage records as dicts with the reference's keys,
    `mood` included, from the server's usage database). The only place that says where
    the relay comes from."""
    running = ServedRelay(tmp_path_factory.mktemp("pigeonhole-relay"))
    try:
        yield running
    finally:
        status = running.stop()
        assert status == 0, f"the relay exited with {status}:\n{running.log_text()}"


def _split_nets(relay: RelayPort, workdir: Path) -> Iterator[SplitNets]:
    """A namespace per side of a transfer, both forwarding to `relay` (and the mailbox)."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("unshare/nsenter (util-linux) not found: no namespace, no forced relay")
    try:
        nets = SplitNets(workdir, relay)
    except OSError as exc:
        pytest.skip(f"cannot create network namespaces: {exc}")
    try:
        yield nets
    finally:
        nets.close()


@pytest.fixture(scope="session")
def split_nets(relay: ServedRelay, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SplitNets]:
    """A namespace per side of a transfer, both forwarding to `relay` (and the mailbox)."""
    yield from _split_nets(relay, tmp_path_factory.mktemp("split-nets"))


@pytest.fixture(scope="session")
def reference_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransitRelay]:
    """The reference relay (`twist transitrelay`) with its usage database, for the tests
    that run a real transfer through it beside ours."""
    running = TransitRelay(tmp_path_factory.mktemp("reference-relay"), usage=True)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="session")
def reference_nets(
    reference_relay: TransitRelay, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SplitNets]:
    """Like `split_nets`, forwarding to the reference relay instead."""
    yield from _split_nets(reference_relay, tmp_path_factory.mktemp("reference-nets"))
