"""The page itself in real headless Chromium (Debian's, through Playwright) against a
`pigeonhole serve` process: it loads with no CSP violation, console error or failed
request, its automation contract is there, it fits 390 px, every control has an accessible
name and is reached by the keyboard, code words are completed, wrong input is explained,
its service worker registers under the CSP, and cancel, decline and the progress figures
work. Transfers with the CLIs are tests/web/test_web_e2e_*."""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from process_support import PIGEONHOLE, ServeProcess, Service, free_port

pytestmark = pytest.mark.slow

TESTIDS = (
    "send-text",
    "send-file",
    "send-button",
    "code",
    "receive-code",
    "receive-button",
    "accept-button",
    "received-text",
    "transfer",
)
#: recorded in the page before its own scripts run (Playwright's init script, outside the CSP)
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""
CODE = re.compile(r"^\d+-[a-z]+-[a-z]+$")
CONTROLS = "button, input, textarea, select, [tabindex]"


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    where = tmp_path_factory.mktemp("web-page")
    with ServeProcess(
        where / "serve.log",
        "--data-dir",
        str(where / "data"),
        "--admin-port",
        "0",
        "--transit-port",
        "0",
    ) as running:
        yield running


class Watched:
    """A tab of the page with everything that went wrong in it recorded."""

    def __init__(self, context: Any, url: str) -> None:
        self.problems: list[str] = []
        context.add_init_script(WATCH_CSP)
        self.page = context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"pageerror {error}"))
        self.page.on("requestfailed", self._failed)
        self.page.on(
            "response",
            lambda r: r.status >= 400 and self.problems.append(f"{r.status} {r.url}"),
        )
        self.page.goto(url + "/")
        self.page.wait_for_load_state("load")

    def _failed(self, request: Any) -> None:
        # a navigation that turns into a download ends as "aborted": that is the download
        if "/web/download/" in request.url and request.failure == "net::ERR_ABORTED":
            return
        self.problems.append(f"failed {request.url}: {request.failure}")

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def by(self, testid: str) -> Any:
        return self.page.get_by_test_id(testid)

    def state(self) -> str:
        return str(self.by("transfer").get_attribute("data-state"))

    def wait_state(self, state: str, timeout_ms: int = 30000) -> None:
        self.page.wait_for_selector(
            f'[data-testid="transfer"][data-state="{state}"]', timeout=timeout_ms
        )

    def wait_code(self) -> str:
        """The code once shown (the CSP forbids eval: no wait_for_function here)."""
        shown = self.by("code").filter(has_text=CODE)
        shown.wait_for(state="visible", timeout=20000)
        return str(shown.inner_text())

    def status(self) -> str:
        return str(self.page.locator("#status").inner_text())

    def clean(self) -> list[str]:
        violations = self.page.evaluate("window.__violations")
        return [*self.problems, *(f"CSP {v}" for v in violations)]


def open_page(browser: Any, server: ServeProcess, **options: Any) -> tuple[Any, Watched]:
    context = browser.new_context(accept_downloads=True, **options)
    return context, Watched(context, f"http://127.0.0.1:{server.port}")


@pytest.mark.parametrize(
    "viewport", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]
)
def test_web_page_loads_clean_with_the_automation_contract(
    browser: Any, page_server: ServeProcess, viewport: dict[str, int]
) -> None:
    context, tab = open_page(browser, page_server, viewport=viewport)
    try:
        page = tab.page
        assert page.title().startswith("Wormhole")
        for testid in TESTIDS:
            assert tab.by(testid).count() == 1, testid
        assert tab.state() == "idle"
        assert tab.by("code").inner_text() == ""
        assert not tab.by("accept-button").is_visible()
        assert tab.by("send-text").evaluate("e => e.tagName") == "TEXTAREA"
        assert tab.by("send-file").get_attribute("type") == "file"
        assert tab.by("receive-code").evaluate("e => e.tagName") == "INPUT"
        # the one plain line about trust
        assert "trust its operator" in page.locator("#trust").inner_text()
        # nothing wider than the window (no sideways scrolling on a phone)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], width
        # the page's scripts ran (the buttons are wired: an empty send is explained)
        tab.by("send-button").click()
        tab.wait_state("failed")
        assert "type a text or choose a file" in tab.status()
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_every_control_has_an_accessible_name(
    browser: Any, page_server: ServeProcess
) -> None:
    context, tab = open_page(browser, page_server)
    try:
        cdp = context.new_cdp_session(tab.page)
        tree = cdp.send("Accessibility.getFullAXTree")["nodes"]
        roles = {"button", "textbox", "combobox"}
        unnamed = [
            node
            for node in tree
            if node.get("role", {}).get("value") in roles
            and not node.get("ignored")
            and not str(node.get("name", {}).get("value", "")).strip()
        ]
        assert unnamed == []
        named = {
            (node["role"]["value"], node["name"]["value"])
            for node in tree
            if node.get("role", {}).get("value") in roles and "name" in node
        }
        assert ("button", "Send") in named
        assert ("button", "Receive") in named
        assert any(role == "combobox" and name == "Code" for role, name in named), named
        # the hidden controls too, once shown (the DOM's labels say what the tree will)
        hidden = tab.page.evaluate(
            f"""[...document.querySelectorAll({CONTROLS!r})]
              .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                           && !e.textContent.trim())
              .map(e => e.id)"""
        )
        assert hidden == []
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_works_from_the_keyboard(browser: Any, page_server: ServeProcess) -> None:
    """Tab reaches every control in order; Enter in the code field starts a receive; a
    code that is not one is explained; typing words offers completions of the PGP words."""
    context, tab = open_page(browser, page_server)
    try:
        page = tab.page
        order = []
        for _ in range(5):
            page.keyboard.press("Tab")
            order.append(page.evaluate("document.activeElement.dataset.testid || ''"))
        assert order == ["send-text", "send-file", "send-button", "receive-code", "receive-button"]
        tab.by("receive-code").focus()
        page.keyboard.type("7-gui")
        options = page.evaluate(
            "[...document.getElementById('code-words').options].map(o => o.value)"
        )
        assert "7-guitarist" in options
        assert all(o.startswith("7-gui") for o in options)
        page.keyboard.type("tarist-rev")
        options = page.evaluate(
            "[...document.getElementById('code-words').options].map(o => o.value)"
        )
        assert options == ["7-guitarist-revenge"]
        tab.by("receive-code").fill("guitarist revenge")
        tab.by("receive-code").press("Enter")
        tab.wait_state("failed")
        assert "starts with a number" in tab.status()
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_a_dropped_file_is_the_file_to_send(
    browser: Any, page_server: ServeProcess
) -> None:
    """Dropped anywhere on the page (which stays), it is shown and can be removed again."""
    context, tab = open_page(browser, page_server)
    try:
        page = tab.page
        dropped = page.evaluate_handle(
            """() => {
              const data = new DataTransfer();
              data.items.add(new File(["hello"], "dropped.txt", {type: "text/plain"}));
              return data;
            }"""
        )
        page.dispatch_event("h1", "dragover", {"dataTransfer": dropped})
        page.dispatch_event("h1", "drop", {"dataTransfer": dropped})
        assert page.url.endswith("/")
        assert tab.by("send-file").evaluate("i => i.files[0].name") == "dropped.txt"
        assert "dropped.txt (5 B)" in page.locator("#file-chosen").inner_text()
        remove = page.get_by_role("button", name="Remove the file")
        remove.focus()
        page.keyboard.press("Enter")
        assert tab.by("send-file").evaluate("i => i.files.length") == 0
        assert not remove.is_visible()
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_service_worker_registers_under_the_csp(
    browser: Any, page_server: ServeProcess
) -> None:
    context, tab = open_page(browser, page_server)
    try:
        scope = tab.page.evaluate(
            """async () => {
              const r = await navigator.serviceWorker.register('/web/sw.js', {scope: '/web/'});
              return r.scope;
            }"""
        )
        assert scope == f"http://127.0.0.1:{page_server.port}/web/"
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_cancel_while_waiting(browser: Any, page_server: ServeProcess) -> None:
    context, tab = open_page(browser, page_server)
    try:
        tab.by("send-text").fill("never received")
        tab.by("send-button").click()
        tab.wait_state("waiting")
        tab.wait_code()
        cancel = tab.page.get_by_role("button", name="Cancel")
        cancel.focus()
        tab.page.keyboard.press("Enter")
        tab.wait_state("failed")
        assert "ancel" in tab.status()
        assert tab.page.get_by_role("button", name="Start over").is_visible()
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_decline_and_progress_between_two_pages(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    """A declined file leaves both pages failed, saying so; an accepted one shows bytes,
    MB/s and the time left, on both sides."""
    source = tmp_path / "figures.bin"
    source.write_bytes(bytes(range(256)) * 4096 * 6)  # 6 MiB
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        sender.by("send-file").set_input_files(str(source))
        sender.by("send-button").click()
        code = sender.wait_code()
        receiver.by("receive-code").fill(code)
        receiver.by("receive-button").click()
        receiver.by("accept-button").wait_for(state="visible")
        offer = receiver.page.locator("#offer-text").inner_text()
        assert "figures.bin" in offer and "6.0 MiB" in offer
        receiver.page.get_by_role("button", name="Decline").click()
        receiver.wait_state("failed")
        sender.wait_state("failed")
        assert "declin" in receiver.status().lower()
        assert "declin" in sender.status().lower() or "reject" in sender.status().lower()

        sender.page.get_by_role("button", name="Start over").click()
        sender.by("send-button").click()
        receiver.by("receive-code").fill(sender.wait_code())
        receiver.by("receive-button").click()
        with receiver.page.expect_download() as download:
            receiver.by("accept-button").click()
        receiver.wait_state("done")
        sender.wait_state("done")
        saved = tmp_path / "saved.bin"
        download.value.save_as(saved)
        assert saved.read_bytes() == source.read_bytes()
        for tab in (sender, receiver):
            figures = tab.page.locator("#progress-text").inner_text()
            assert re.fullmatch(r"6\.0 MiB of 6\.0 MiB · \d+\.\d MB/s · .+ left", figures), figures
            assert tab.page.locator("#progress").evaluate("p => p.value === p.max")
        assert "in your downloads" in receiver.status()
        assert sender.clean() == [] and receiver.clean() == []
    finally:
        sending.close()
        receiving.close()


def send_file_between(sender: Watched, receiver: Watched, source: Path, saved: Path) -> None:
    """`source` from one page to the other, saved at `saved`."""
    sender.by("send-file").set_input_files(str(source))
    sender.by("send-button").click()
    receiver.by("receive-code").fill(sender.wait_code())
    receiver.by("receive-button").click()
    with receiver.page.expect_download() as download:
        receiver.by("accept-button").click()
    receiver.wait_state("done")
    sender.wait_state("done")
    download.value.save_as(saved)


def test_web_page_without_a_service_worker_keeps_the_file_in_memory_and_says_so(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    source = tmp_path / "small.bin"
    source.write_bytes(bytes(range(256)) * 1024)
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server, service_workers="block")
    try:
        send_file_between(sender, receiver, source, tmp_path / "saved.bin")
        assert (tmp_path / "saved.bin").read_bytes() == source.read_bytes()
        notice = receiver.page.locator("#notice").inner_text()
        assert "held in memory" in notice and "service worker" in notice, notice
        blocked = "console warning: Service Worker registration blocked by Playwright"
        assert sender.clean() == [] and [p for p in receiver.clean() if p != blocked] == []
    finally:
        sending.close()
        receiving.close()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`pigeonhole serve --tls-cert`: the page at https://, the mailbox at wss://."""
    where = tmp_path_factory.mktemp("web-tls")
    cert = trustme.CA().issue_cert("127.0.0.1")
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    port = free_port()
    unverified = ssl.create_default_context()
    unverified.check_hostname = False
    unverified.verify_mode = ssl.CERT_NONE

    direct = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=unverified)
    )

    def answers() -> bool:
        try:
            with direct.open(f"https://127.0.0.1:{port}/", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    argv = [*PIGEONHOLE, "serve", "--port", str(port), "--data-dir", str(where / "data")]
    argv += ["--admin-port", "0", "--transit-port", "0"]
    argv += ["--tls-cert", str(cert_path), "--tls-key", str(key_path)]
    with Service(argv, where / "serve.log", answers) as running:
        running.port = port  # type: ignore[attr-defined]
        yield running


def test_web_page_over_https_uses_wss(browser: Any, tls_server: Service, tmp_path: Path) -> None:
    """Served with TLS, the page reaches the mailbox and the relay by wss:// only."""
    url = f"https://127.0.0.1:{tls_server.port}"  # type: ignore[attr-defined]
    contexts, tabs, sockets = [], [], []
    for _ in range(2):
        context = browser.new_context(accept_downloads=True, ignore_https_errors=True)
        contexts.append(context)
        tab = Watched(context, url)
        tab.page.on("websocket", lambda ws: sockets.append(ws.url))
        tabs.append(tab)
    sender, receiver = tabs
    try:
        sender.by("send-text").fill("over tls")
        sender.by("send-button").click()
        receiver.by("receive-code").fill(sender.wait_code())
        receiver.by("receive-button").click()
        receiver.wait_state("done")
        assert receiver.by("received-text").inner_text() == "over tls"
        source = tmp_path / "tls.bin"
        source.write_bytes(bytes(range(256)) * 2048)
        sender.page.get_by_role("button", name="Start over").click()
        send_file_between(sender, receiver, source, tmp_path / "saved.bin")
        assert (tmp_path / "saved.bin").read_bytes() == source.read_bytes()
        port = tls_server.port  # type: ignore[attr-defined]
        assert f"wss://127.0.0.1:{port}/v1" in sockets
        assert f"wss://127.0.0.1:{port}/transit" in sockets
        assert all(s.startswith("wss://") for s in sockets), sockets
    finally:
        for context in contexts:
            context.close()


def test_web_page_mints_hashcash_when_the_server_requires_it(browser: Any, tmp_path: Path) -> None:
    """A server that offers only hashcash: both pages mint their stamps and exchange a text."""
    with ServeProcess(
        tmp_path / "serve.log",
        "--data-dir",
        str(tmp_path / "data"),
        "--admin-port",
        "0",
        "--transit-port",
        "0",
        "--permissions",
        "hashcash",
        "--hashcash-bits",
        "16",
        "--public-metrics",
    ) as server:
        sending, sender = open_page(browser, server)
        receiving, receiver = open_page(browser, server)
        try:
            sender.by("send-text").fill("paid for")
            sender.by("send-button").click()
            receiver.by("receive-code").fill(sender.wait_code())
            receiver.by("receive-button").click()
            receiver.wait_state("done")
            sender.wait_state("done")
            assert receiver.by("received-text").inner_text() == "paid for"
            assert sender.clean() == [] and receiver.clean() == []
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with direct.open(f"http://127.0.0.1:{server.port}/metrics") as answer:
                metrics = answer.read().decode()
            # both pages' stamps were checked and granted; none refused
            assert re.search(r'permission_outcomes_total\{outcome="granted"\} [2-9]', metrics)
            assert 'outcome="refused"} 0' in metrics or 'outcome="refused"' not in metrics
        finally:
            sending.close()
            receiving.close()


def test_web_page_a_download_cancelled_in_the_browser_stops_both_pages(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    """The person cancels the download (the browser's own control): the worker's stream is
    cancelled, the receiving page stops and says so, and the sending page is told."""
    source = tmp_path / "big.bin"
    with open(source, "wb") as f:
        for _ in range(64):
            f.write(bytes(range(256)) * 4096)  # 64 MiB in all
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        sender.by("send-file").set_input_files(str(source))
        sender.by("send-button").click()
        receiver.by("receive-code").fill(sender.wait_code())
        receiver.by("receive-button").click()
        with receiver.page.expect_download() as download:
            receiver.by("accept-button").click()
        download.value.cancel()
        receiver.wait_state("failed")
        sender.wait_state("failed")
        assert "cancelled in the browser" in receiver.status(), receiver.status()
        assert sender.status(), "the sender failed without a message"
        assert "Start over" in receiver.page.locator("#reset-button").inner_text()
    finally:
        sending.close()
        receiving.close()


def test_web_page_an_empty_file_arrives_empty(
    browser: Any, page_server: ServeProcess, tmp_path: Path
) -> None:
    source = tmp_path / "empty.txt"
    source.write_bytes(b"")
    sending, sender = open_page(browser, page_server)
    receiving, receiver = open_page(browser, page_server)
    try:
        send_file_between(sender, receiver, source, tmp_path / "saved.txt")
        assert (tmp_path / "saved.txt").read_bytes() == b""
        assert "empty.txt (0 B) received" in receiver.status()
        assert sender.clean() == [] and receiver.clean() == []
    finally:
        sending.close()
        receiving.close()
