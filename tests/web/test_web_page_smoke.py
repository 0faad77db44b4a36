"""The page itself in real headless Chromium (Debian's, through Playwright) against a
`pigeonhole serve` process: it loads with no CSP violation, console error or failed
request, its automation contract is there, it fits 390 px, every control has an accessible
name and is reached by the keyboard, code words are completed, wrong input is explained, a
dropped file is taken, its service worker registers under the CSP, the code comes into
view with the focus after Send, and Cancel works.
Transfers between pages: test_web_page_transfers.py; with the CLIs: test_web_e2e_*."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.process import ServeProcess
from tests.web.web_page_support import open_page, serve_page
from tests.web.web_support import TESTIDS

pytestmark = pytest.mark.slow

CONTROLS = "button, input, textarea, select, [tabindex]"


@pytest.fixture(scope="module")
def page_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_page(tmp_path_factory.mktemp("web-page")) as running:
        yield running


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
            assert tab.by_id(testid).count() == 1, testid
        assert tab.state() == "idle"
        assert tab.by_id("code").inner_text() == ""
        assert not tab.by_id("accept-button").is_visible()
        assert tab.by_id("send-text").evaluate("e => e.tagName") == "TEXTAREA"
        assert tab.by_id("send-file").get_attribute("type") == "file"
        assert tab.by_id("receive-code").evaluate("e => e.tagName") == "INPUT"
        # the one plain line about trust
        assert "trust its operator" in page.locator("#trust").inner_text()
        # nothing wider than the window (no sideways scrolling on a phone)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= viewport["width"], width
        # the page's scripts ran (the buttons are wired: an empty send is explained)
        tab.by_id("send-button").click()
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
        for _ in range(6):
            page.keyboard.press("Tab")
            order.append(page.evaluate("document.activeElement.dataset.testid || ''"))
        assert order == [
            "send-text", "send-file", "send-folder", "send-button", "receive-code", "receive-button"
        ]  # fmt: skip
        tab.by_id("receive-code").focus()
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
        tab.by_id("receive-code").fill("guitarist revenge")
        tab.by_id("receive-code").press("Enter")
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
        chosen = page.locator("#file-chosen")
        chosen.filter(has_text="dropped.txt (5 B)").wait_for()  # read from the drop's entries
        remove = page.get_by_role("button", name="Remove", exact=True)
        remove.focus()
        page.keyboard.press("Enter")
        assert chosen.inner_text() == ""
        assert tab.by_id("send-file").evaluate("i => i.files.length") == 0
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


IN_VIEW = """(id) => {
  const r = document.getElementById(id).getBoundingClientRect();
  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;
}"""


@pytest.mark.parametrize(
    "viewport", [{"width": 1000, "height": 560}, {"width": 390, "height": 844}]
)
def test_web_page_after_send_the_code_is_in_view_large_with_focus_on_copy(
    browser: Any, page_server: ServeProcess, viewport: dict[str, int]
) -> None:
    """The code box starts below the fold (a phone) or at the window's bottom edge (a short
    desktop window): once the code is shown it is scrolled into view, Copy code has the
    focus (Enter copies it; a screen reader reads the code with it), and the code is as
    large on a phone as on a desktop."""
    context, tab = open_page(browser, page_server, viewport=viewport)
    try:
        page = tab.page
        assert not page.evaluate(IN_VIEW, "transfer-title")
        tab.by_id("send-text").fill("the code must be seen")
        tab.by_id("send-button").click()
        code = tab.code()
        assert page.evaluate(IN_VIEW, "code"), f"the code {code} is out of view at {viewport}"
        assert page.evaluate(IN_VIEW, "copy-code")
        assert page.evaluate("document.activeElement.id") == "copy-code"
        assert page.locator("#copy-code").get_attribute("aria-describedby") == "code"
        size = tab.by_id("code").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
        assert size >= 32, f"the code is {size} px at {viewport['width']} px"
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        page.get_by_role("button", name="Cancel").click()
        tab.wait_state("failed")
        assert tab.clean() == []
    finally:
        context.close()


def test_web_page_cancel_while_waiting(browser: Any, page_server: ServeProcess) -> None:
    context, tab = open_page(browser, page_server)
    try:
        tab.by_id("send-text").fill("never received")
        tab.by_id("send-button").click()
        tab.wait_state("waiting")
        tab.code()
        cancel = tab.page.get_by_role("button", name="Cancel")
        cancel.focus()
        tab.page.keyboard.press("Enter")
        tab.wait_state("failed")
        assert "ancel" in tab.status()
        assert tab.page.get_by_role("button", name="Start over").is_visible()
        assert tab.clean() == []
    finally:
        context.close()
