"""Several files and folders, in headless Chromium against `pigeonhole serve`, with the real
clients: a folder picked in the page (`send-folder`) arrives through `wormhole receive` and
through wormhole-william as the same tree, every file byte-exact (empty files, names with
spaces and non-ASCII, nested folders); several files picked at once (`send-file` carries
`multiple`) arrive as one folder; `wormhole send DIR` -> page arrives as the zip, which
holds the same tree; a folder one of whose files went away after it was picked fails with
the file's name before any code is given; a folder send cancelled midway stops cleanly.
"""

from __future__ import annotations

import hashlib
import os
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.relay import ServedRelay, wait_for_happy
from tests.web.test_web_e2e_ww import KeyMismatch, WwRun, on_host, retried, ww_path
from tests.web.web_support import MIB, Cli, PageFailed, WebPage, random_file

pytestmark = [pytest.mark.interop, pytest.mark.slow]

#: the tree sent: path below the folder -> size (0: an empty file)
TREE = {
    "empty.txt": 0,
    "a name with spaces.bin": 70_000,
    "naïve café/日本語 ファイル.txt": 1 * MIB + 17,
    "nested/deeper/deepest/data.bin": 3 * MIB,
    "nested/also empty": 0,
}


def make_tree(root: Path) -> Path:
    for rel, size in TREE.items():
        path = root / rel
        if size:
            random_file(path.parent, size, name=path.name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    return root


def digests(root: Path) -> dict[str, str]:
    """Every file under `root`: its path below it -> sha256 (folders only through files)."""
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def send_folder(page: WebPage, folder: Path) -> str:
    page.by_id("send-folder").set_input_files(str(folder))
    page.by_id("send-button").click()
    return page.code()


def test_web_e2e_page_sends_folder_to_cli(
    web_page: WebPage, cli: Cli, web_server: ServedRelay, tmp_path: Path
) -> None:
    source = make_tree(tmp_path / "My folder ✓")
    since = len(web_server.records())
    code = send_folder(web_page, source)
    receiver = cli.start(
        "receive", "receive", "--no-listen", "--hide-progress", "--accept-file", code
    )
    receiver.check()
    web_page.wait_state("done", timeout=30)
    got = receiver.cwd / source.name
    assert got.is_dir(), receiver.describe()
    assert digests(got) == digests(source)
    assert f"{len(TREE)} files" in web_page.message()
    wait_for_happy(web_server.records, since, sum(TREE.values()))


def test_web_e2e_page_sends_several_files_to_cli(
    web_page: WebPage, cli: Cli, tmp_path: Path
) -> None:
    files = [
        random_file(tmp_path / "picked", 5000, name="one.bin"),
        random_file(tmp_path / "picked", 0, name="two empty.bin"),
        random_file(tmp_path / "picked", 2 * MIB, name="drei ß.bin"),
    ]
    assert web_page.by_id("send-file").get_attribute("multiple") is not None
    web_page.by_id("send-file").set_input_files([str(f) for f in files])
    web_page.by_id("send-button").click()
    code = web_page.code()
    receiver = cli.start(
        "receive", "receive", "--no-listen", "--hide-progress", "--accept-file", code
    )
    receiver.check()
    web_page.wait_state("done", timeout=30)
    assert digests(receiver.cwd / "wormhole-files") == digests(tmp_path / "picked")


def test_web_e2e_page_sends_folder_to_ww(context: Any, base_url: str, tmp_path: Path) -> None:
    ww = ww_path()
    source = make_tree(tmp_path / "for william")

    def attempt(label: str) -> WwRun:
        page = WebPage.open(context, base_url)
        code = send_folder(page, source)
        run = WwRun([ww, "--relay-url", f"ws://{base_url.split('//')[1]}/v1", "receive",
                     "--hide-progress", code], tmp_path / label, on_host)  # fmt: skip
        status = run.wait()
        try:
            page.wait_state("done", timeout=30)
        except PageFailed as failed:
            if run.mismatch():
                raise KeyMismatch(str(failed)) from failed
            raise AssertionError(f"{failed}\n{run.describe()}") from failed
        assert status == 0, run.describe()
        return run

    run = retried("page->ww folder", attempt)
    assert digests(run.cwd / source.name) == digests(source), run.describe()


def test_web_e2e_cli_sends_folder_to_page(web_page: WebPage, cli: Cli, tmp_path: Path) -> None:
    source = make_tree(tmp_path / "from the cli")
    sender = cli.send(str(source))
    web_page.enter_code(sender.wait_code())
    download = web_page.accept_offer()
    web_page.wait_state("done", timeout=60)
    sender.check()
    got = tmp_path / "got" / download.suggested_filename
    download.save_as(str(got))
    assert got.name == f"{source.name}.zip"
    with zipfile.ZipFile(got) as archive:
        archive.extractall(tmp_path / "unzipped")
    assert digests(tmp_path / "unzipped") == digests(source)


def test_web_e2e_folder_with_a_file_gone_fails_by_name(web_page: WebPage, tmp_path: Path) -> None:
    source = make_tree(tmp_path / "going")
    web_page.by_id("send-folder").set_input_files(str(source))
    (source / "nested/deeper/deepest/data.bin").unlink()  # after it was picked
    web_page.by_id("send-button").click()
    web_page.wait_state("failed", timeout=20)
    message = web_page.message()
    assert '"nested/deeper/deepest/data.bin" cannot be read' in message
    assert web_page.by_id("code").inner_text().strip() == "", "a code was given for it"


def test_web_e2e_folder_send_cancelled_midway(web_page: WebPage, cli: Cli, tmp_path: Path) -> None:
    """Cancel while the zip is on its way: the page says so (its tab does not crash: Chromium's
    worker did on a WebSocketStream write after its close), the CLI stops without a folder,
    and the folder on disk is untouched."""
    crashed: list[str] = []
    web_page.page.on("crash", lambda _page: crashed.append("the tab crashed"))
    source = tmp_path / "big folder"
    for i in range(4):
        random_file(source / f"part {i}", 40 * MIB, name=f"chunk-{i}.bin")
    before = digests(source)
    code = send_folder(web_page, source)
    receiver = cli.start("receive", "receive", "--no-listen", "--accept-file", code)
    web_page.wait_state("transferring", timeout=60)
    progress = web_page.page.locator("#progress")
    deadline = time.monotonic() + 60
    while float(progress.get_attribute("value") or 0) <= 0:
        assert time.monotonic() < deadline, web_page.message()
        web_page.page.wait_for_timeout(20)
    web_page.page.get_by_role("button", name="Cancel").click()
    web_page.wait_state("failed", timeout=30)
    assert "Cancelled" in web_page.message()
    assert receiver.wait(60) != 0, receiver.describe()
    # told by the page's relay connection closing, not by its own timeout
    assert "ConnectionClosed" in receiver.output, receiver.describe()
    assert not crashed
    assert not (receiver.cwd / source.name).exists(), receiver.describe()
    assert digests(source) == before
