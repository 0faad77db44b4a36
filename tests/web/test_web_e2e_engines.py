"""The page with the `wormhole` CLI in Firefox and in WebKit (tests/web/engines.py), against
`pigeonhole serve`: a text each way, a 20 MiB file each way (the download byte-exact on
disk, where the browser saved it), and a wrong code (both sides fail, the page says so).
Neither engine has `WebSocketStream`: the relay's bytes go over the plain `WebSocket`.
Chromium runs the same cases and more in test_web_e2e_cli.py and test_web_e2e_page.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.engines import ENGINES, EngineTab, engine_tab
from tests.web.web_support import (
    CLI_MISMATCH,
    MIB,
    Cli,
    PageFailed,
    random_file,
    random_text,
    sha256_file,
)

FILE_SIZE = 20 * MIB

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module", params=ENGINES)
def engine(
    request: pytest.FixtureRequest, base_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineTab]:
    downloads = tmp_path_factory.mktemp(f"{request.param}-downloads")
    with engine_tab(str(request.param), base_url, downloads) as tab:
        yield tab


@pytest.fixture
def tab(engine: EngineTab) -> EngineTab:
    """The page loaded afresh, the downloads directory emptied."""
    for old in engine.downloads.iterdir():
        old.unlink()
    return engine.open()


def test_web_engine_text_both_ways(tab: EngineTab, cli: Cli) -> None:
    text = random_text()
    receiver = cli.receive(tab.send_text(text), file=False)
    receiver.check()
    assert text in receiver.output.splitlines(), receiver.describe()
    tab.wait_state("done", timeout=30)

    tab.open()
    text = random_text()
    sender = cli.send("--text", text, name="send-text")
    tab.enter_code(sender.wait_code())
    tab.wait_state("done", timeout=60)
    sender.check()
    assert str(tab.js("document.querySelector('[data-testid=received-text]').textContent")) == text


def test_web_engine_file_page_to_cli(tab: EngineTab, cli: Cli, tmp_path: Path) -> None:
    source = random_file(tmp_path / "source", FILE_SIZE)
    receiver = cli.receive(tab.send_file(source), file=True)
    receiver.check()
    tab.wait_state("done", timeout=60)
    assert sha256_file(receiver.received) == sha256_file(source)


def test_web_engine_file_cli_to_page(tab: EngineTab, cli: Cli, tmp_path: Path) -> None:
    source = random_file(tmp_path / "source", FILE_SIZE, name="twenty-mebibytes.bin")
    sender = cli.send(str(source))
    tab.enter_code(sender.wait_code())
    tab.accept()
    tab.wait_state("done", timeout=120)
    sender.check()
    got = tab.downloaded(source.name, FILE_SIZE)
    assert sha256_file(got) == sha256_file(source)


def test_web_engine_wrong_code(tab: EngineTab, cli: Cli) -> None:
    code = tab.send_text(random_text())
    nameplate, *words = code.split("-")
    wrong = "-".join([nameplate, *words[:-1], "aardvark" if words[-1] != "aardvark" else "absurd"])
    receiver = cli.receive(wrong, file=False)
    assert receiver.wait() != 0, receiver.describe()
    assert CLI_MISMATCH.search(receiver.output), receiver.describe()
    with pytest.raises(PageFailed):
        tab.wait_state("done", timeout=30)
    assert tab.state() == "failed"
    assert "code" in tab.message().lower()
