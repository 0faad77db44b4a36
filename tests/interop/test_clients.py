"""Real clients through Pigeonhole: the Python `wormhole` CLI and wormhole-william.

Pairings are named SENDER-RECEIVER, `py` = Python, `ww` = wormhole-william.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.support.interop import Harness, PairResult, check_success, check_wrong_code, concurrently
from tests.support.process import InteropError
from tests.support.wormhole_clients import (
    PAIRS,
    WORMHOLE_WILLIAM,
    WRONG_CODE_TIMEOUT,
    Kind,
    random_file,
    random_text,
    require,
)

pytestmark = pytest.mark.interop

pairs = pytest.mark.parametrize(("sender", "receiver"), PAIRS, ids=[f"{s}-{r}" for s, r in PAIRS])


@pairs
def test_text(harness: Harness, sender: Kind, receiver: Kind) -> None:
    require(sender, receiver)
    harness.transfer(sender, receiver, random_text(), "text")


@pairs
def test_file_1mib(harness: Harness, tmp_path: Path, sender: Kind, receiver: Kind) -> None:
    harness.net.require_files(sender, receiver)
    harness.transfer(sender, receiver, random_file(tmp_path / "payload"), "file")


@pairs
def test_allocated_code(harness: Harness, sender: Kind, receiver: Kind) -> None:
    """The sender gives no code: the server allocates the nameplate."""
    require(sender, receiver)
    result = harness.transfer(sender, receiver, random_text(), "alloc", allocate=True)
    nameplate, _, words = result.code.partition("-")
    assert nameplate.isdigit() and words, result.code


@pairs
def test_receiver_first(harness: Harness, sender: Kind, receiver: Kind) -> None:
    """The receiver claims the nameplate and waits; the sender comes 2 s later."""
    require(sender, receiver)
    harness.transfer(sender, receiver, random_text(), "recvfirst", receiver_first=True)


def test_receiver_first_file_ww_py(harness: Harness, tmp_path: Path) -> None:
    harness.net.require_files("ww", "py")
    payload = random_file(tmp_path / "payload")
    harness.transfer("ww", "py", payload, "recvfirst-file", receiver_first=True)


@pairs
def test_wrong_code(harness: Harness, sender: Kind, receiver: Kind) -> None:
    """Right nameplate, wrong words: both sides fail with their wrong-key error."""
    require(sender, receiver)
    code = harness.codes.next()
    nameplate = code.split("-", 1)[0]
    wrong = f"{nameplate}-{harness.codes.words()}"
    while wrong == code:
        wrong = f"{nameplate}-{harness.codes.words()}"
    result = harness.pair(
        sender,
        receiver,
        random_text(),
        "wrongcode",
        code=code,
        receiver_code=wrong,
        timeout=WRONG_CODE_TIMEOUT,
    )
    check_wrong_code(result, harness.server)


def test_concurrent_text_4(harness: Harness) -> None:
    """Four pairs, one of each pairing, at the same time with chosen codes."""
    require("ww")
    concurrently(
        [partial(harness.transfer, s, r, random_text(), f"conc-text-{s}-{r}") for s, r in PAIRS]
    )


def test_concurrent_file_4(harness: Harness, tmp_path: Path) -> None:
    """Four 1 MiB files at the same time: one of each pairing.

    Without a namespace (no wormhole-william file transfers) two py->py pairs.
    """
    pairings: list[tuple[Kind, Kind]] = (
        PAIRS if harness.net.in_netns and WORMHOLE_WILLIAM else [("py", "py")] * 2
    )
    concurrently(
        [
            partial(
                harness.transfer, s, r, random_file(tmp_path / f"payload-{i}"), f"conc-file-{s}-{r}"
            )
            for i, (s, r) in enumerate(pairings)
        ]
    )


def test_concurrent_allocated_4(harness: Harness) -> None:
    """Four senders hold server-allocated codes at once: the nameplates differ.

    All four codes are read before any receiver starts, then each pairing completes.
    """
    require("ww")
    payloads = [random_text() for _ in PAIRS]
    senders = []
    try:
        for (s, _r), p in zip(PAIRS, payloads, strict=True):
            senders.append(harness.start(s, "send", None, p, f"conc-alloc-{s}"))
        codes = [c.wait_code() for c in senders]
        nameplates = [code.split("-", 1)[0] for code in codes]
        assert len(set(nameplates)) == len(nameplates), f"nameplates not distinct: {codes}"

        def receive(i: int) -> PairResult:
            (_s, r), sender = PAIRS[i], senders[i]
            receiver = harness.start(r, "receive", codes[i], payloads[i], f"conc-alloc-{r}")
            sender.wait()
            receiver.wait()
            return PairResult(sender, receiver, codes[i], payloads[i])

        results = concurrently([partial(receive, i) for i in range(len(PAIRS))])
    finally:
        for c in senders:
            c.kill()
    failures: list[str] = []
    for (s, r), result in zip(PAIRS, results, strict=True):
        try:
            if s != r and result.both_mismatch():  # known py<->ww PAKE quirk: retry once
                harness.transfer(s, r, random_text(), f"conc-alloc-{s}-{r}-retry", allocate=True)
            else:
                check_success(result, harness.server)
        except InteropError as exc:
            failures.append(str(exc))
    assert not failures, "\n\n".join(failures)
