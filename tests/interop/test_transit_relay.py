"""Real clients forced through Pigeonhole's transit relay.

Each side runs in a network namespace of its own (only `lo`, forwarders to the mailbox and
to our relay at 127.0.0.1:4001, and `transit.magic-wormhole.io` mapped to 127.0.0.1), so a
direct hint from one side points into the other's empty namespace: the bytes can only go
through the relay, and its usage records must show a `happy` pair that carried them.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest

from tests.support.interop import Harness
from tests.support.interop_servers import Server, TransitRelay
from tests.support.relay import (
    FOWLD,
    EchoServer,
    Fowld,
    Record,
    ServedRelay,
    SplitNets,
    wait_for_happy,
)
from tests.support.wormhole_clients import PAIRS, Codes, Kind, random_file, require

MIB = 1 << 20
FILE_SIZE = 20 * MIB
#: per client: 20 MiB through two forwarders and the relay on a busy 2-core machine
FILE_TIMEOUT = 180.0
STREAM_SIZE = 8 * MIB
FOWLD_TIMEOUT = 180.0
#: ports inside the namespaces (each namespace is empty, so any port is free there)
ECHO_PORT = 7001
FORWARD_PORT = 7002

pytestmark = pytest.mark.interop


@pytest.mark.parametrize(("sender", "receiver"), PAIRS, ids=[f"{s}-{r}" for s, r in PAIRS])
def test_file_goes_through_our_relay(
    sender: Kind,
    receiver: Kind,
    relay: ServedRelay,
    split_nets: SplitNets,
    server: Server,
    codes: Codes,
    tmp_path: Path,
) -> None:
    require(sender, receiver)
    sending = Harness(split_nets.send, server, tmp_path / "send", codes)
    receiving = Harness(split_nets.receive, server, tmp_path / "receive", codes)
    payload = random_file(tmp_path / "payload", FILE_SIZE)
    since = len(relay.records())
    sending.transfer(
        sender, receiver, payload, "relay", receive_via=receiving, timeout=FILE_TIMEOUT
    )  # sha256 checked
    wait_for_happy(relay.records, since, FILE_SIZE)


#: one pairing each way between the two clients: each client sends once and receives once
BESIDE = [("py", "ww"), ("ww", "py")]


@pytest.mark.parametrize(("sender", "receiver"), BESIDE, ids=[f"{s}-{r}" for s, r in BESIDE])
def test_the_same_transfer_through_the_reference_relay_is_recorded_alike(
    sender: Kind,
    receiver: Kind,
    relay: ServedRelay,
    split_nets: SplitNets,
    reference_relay: TransitRelay,
    reference_nets: SplitNets,
    server: Server,
    codes: Codes,
    tmp_path: Path,
) -> None:
    """Side by side: the same real clients move the same file through the reference relay
    and through ours; both relays keep one `happy` record with the same byte count."""
    require(sender, receiver)
    payload = random_file(tmp_path / "payload", 4 * MIB)
    found: dict[str, Record] = {}
    for name, nets, records in (
        ("reference", reference_nets, reference_relay.records),
        ("pigeonhole", split_nets, relay.records),
    ):
        since = len(records())
        sending = Harness(nets.send, server, tmp_path / name / "send", codes)
        receiving = Harness(nets.receive, server, tmp_path / name / "receive", codes)
        sending.transfer(
            sender, receiver, payload, "relay", receive_via=receiving, timeout=FILE_TIMEOUT
        )  # sha256 checked
        (found[name],) = wait_for_happy(records, since, 4 * MIB)
    assert found["pigeonhole"]["total_bytes"] == found["reference"]["total_bytes"], found
    for record in found.values():  # the transfer, not the wait, took the time
        assert 0 <= record["waiting_time"] <= record["total_time"] < FILE_TIMEOUT, found


def echo_through(conn: socket.socket, size: int) -> tuple[str, str]:
    """Send `size` random bytes on `conn` and read as many back: both sha256s."""
    data = os.urandom(size)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            conn.sendall(data)
        except OSError as exc:
            errors.append(exc)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    got = bytearray()
    while len(got) < size and (chunk := conn.recv(1 << 16)):
        got += chunk
    sender.join(30)
    assert not errors, errors
    return hashlib.sha256(data).hexdigest(), hashlib.sha256(got).hexdigest()


def test_dilation_forwards_a_stream_through_our_relay(
    relay: ServedRelay, split_nets: SplitNets, server: Server, tmp_path: Path
) -> None:
    """fowld on both sides: a port forwarded from one namespace to an echo server in the
    other carries 8 MiB each way over Dilation, which fowld always dials through
    transit.magic-wormhole.io:4001, that is our relay."""
    if not FOWLD.exists():
        pytest.skip(f"fowl is not installed ({FOWLD}); scripts/setup --test installs it")
    mailbox = split_nets.send.mailbox_url(server)
    assert split_nets.receive.mailbox_url(server) == mailbox
    assert split_nets.receive.netns is not None and split_nets.send.netns is not None
    echo = EchoServer(split_nets.receive.netns.listen(ECHO_PORT), FOWLD_TIMEOUT)
    since = len(relay.records())
    host = Fowld(split_nets.send, mailbox, tmp_path / "fowld-host", FOWLD_TIMEOUT)
    guest = Fowld(split_nets.receive, mailbox, tmp_path / "fowld-guest", FOWLD_TIMEOUT)
    try:
        host.wait_for("welcome")
        host.send(kind="allocate-code")
        code = host.wait_for("code-allocated")["code"]
        guest.wait_for("welcome")
        guest.send(kind="set-code", code=code)
        host.wait_for("peer-connected")
        guest.wait_for("peer-connected")
        host.send(
            kind="local", name="echo", local_listen_port=FORWARD_PORT,
            remote_connect_port=ECHO_PORT,
        )  # fmt: skip
        guest.send(kind="remote", name="echo")
        host.wait_for("listening")
        with split_nets.send.netns.connect(FORWARD_PORT, timeout=60) as conn:
            sent, echoed = echo_through(conn, STREAM_SIZE)
        assert echoed == sent, f"{echo.echoed} bytes echoed\n{host.describe()}"
    finally:
        host.close()
        guest.close()
        echo.close()
    wait_for_happy(relay.records, since, 2 * STREAM_SIZE)
