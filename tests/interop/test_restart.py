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
import time
from pathlib import Path

import pytest
from interop_support import (
    WORMHOLE_WILLIAM,
    Codes,
    Harness,
    InteropError,
    Kind,
    Net,
    PairResult,
    Server,
    check_success,
    random_text,
)

pytestmark = pytest.mark.interop

WAIT_BEFORE_STOP = 2.0


def restart_scenario(
    net: Net, codes: Codes, server: Server, workdir: Path, sig: int, receivers: list[Kind]
) -> list[PairResult]:
    harness = Harness(net, server, workdir, codes)
    payloads = [random_text() for _ in receivers]
    code_list = [codes.next() for _ in receivers]
    senders = [
        harness.start("py", "send", code, p, f"restart-to-{r}")
        for code, p, r in zip(code_list, payloads, receivers, strict=True)
    ]
    started = []
    try:
        for s in senders:
            s.wait_code()  # printed after the server's welcome
        time.sleep(WAIT_BEFORE_STOP)
        for s in senders:
            if s.returncode is not None:
                raise InteropError(f"sender exited before the restart\n{s.describe()}")
        rc = server.stop(sig)
        if sig == signal.SIGTERM:
            assert rc == 0, f"SIGTERM: the server exited with {rc}\n{server.log_text()[-2000:]}"
        else:
            assert rc == -signal.SIGKILL, rc
        server.start()
        started = [
            harness.start(r, "receive", code, p, f"restart-to-{r}")
            for code, p, r in zip(code_list, payloads, receivers, strict=True)
        ]
        for c in [*senders, *started]:
            c.wait()
    finally:
        for c in [*senders, *started]:
            c.kill()
    return [
        PairResult(s, r, code, p)
        for s, r, code, p in zip(senders, started, code_list, payloads, strict=True)
    ]


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
