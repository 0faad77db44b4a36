"""A server restart while Python senders wait: nothing they were told is lost.

Each Python sender starts with a chosen code and waits ~2 s (nameplate claimed,
mailbox open, PAKE message posted). The server is stopped (SIGKILL, or SIGTERM
which must exit 0), started again on the same data dir and port, and only then
do the receivers start. The Python sender reconnects by itself and the transfer
completes. A Python and (when installed) a wormhole-william receiver take part.
wormhole-william *senders* cannot survive a restart (they never reconnect), so
they are not tested here.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from tests.support.interop import Harness, PairResult, check_success, senders_wait_through
from tests.support.interop_servers import Server
from tests.support.netns import Net
from tests.support.process import InteropError
from tests.support.wormhole_clients import WORMHOLE_WILLIAM, Codes, Kind

pytestmark = pytest.mark.interop


def restart_scenario(
    net: Net, codes: Codes, server: Server, workdir: Path, sig: int, receivers: list[Kind]
) -> list[PairResult]:
    harness = Harness(net, server, workdir, codes)

    def restart() -> None:
        rc = server.stop(sig)
        if sig == signal.SIGTERM:
            assert rc == 0, f"SIGTERM: the server exited with {rc}\n{server.log_text()[-2000:]}"
        else:
            assert rc == -signal.SIGKILL, rc
        server.start()

    return senders_wait_through(harness, harness, receivers, restart, "restart")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_restart_while_sender_waits(net: Net, codes: Codes, tmp_path: Path, sig: int) -> None:
    server = Server(tmp_path / "data", tmp_path / "server.log")
    server.start()
    try:
        receivers: list[Kind] = ["py", "ww"] if WORMHOLE_WILLIAM else ["py"]
        results = restart_scenario(net, codes, server, tmp_path / "run1", sig, receivers)
        failures: list[str] = []
        for result in results:
            if result.receiver.kind == "ww" and result.both_mismatch():
                # known py<->ww PAKE quirk: run the py->ww restart scenario once more
                print("# restart py->ww: key mismatch on both sides, retrying", file=sys.stderr)
                (result,) = restart_scenario(net, codes, server, tmp_path / "run2", sig, ["ww"])
            try:
                check_success(result, server)
            except InteropError as exc:
                failures.append(str(exc))
        assert not failures, "\n\n".join(failures)
    finally:
        server.stop(signal.SIGKILL)
