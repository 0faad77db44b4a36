"""The page in a Playwright tab with everything that went wrong in it recorded (console
errors and warnings, uncaught exceptions, failed requests, CSP violations), and
`pigeonhole serve` for it: shared by tests/web/test_web_page_*."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.process import ServeProcess
from tests.web.web_support import WebPage

#: recorded in the page before its own scripts run (Playwright's init script, outside the CSP)
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


def serve_page(where: Path, *args: str) -> ServeProcess:
    """`pigeonhole serve` on free ports, its data in `where`."""
    return ServeProcess(
        where / "serve.log",
        "--data-dir",
        str(where / "data"),
        "--admin-port",
        "0",
        "--transit-port",
        "0",
        *args,
    )


class Watched(WebPage):
    """A tab of the page (driven as `WebPage` drives it) with everything that went wrong
    in it recorded."""

    def __init__(self, context: Any, url: str) -> None:
        self.problems: list[str] = []
        context.add_init_script(WATCH_CSP)
        page = context.new_page()
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"pageerror {error}"))
        page.on("requestfailed", self._failed)
        page.on(
            "response",
            lambda r: r.status >= 400 and self.problems.append(f"{r.status} {r.url}"),
        )
        page.goto(url + "/")
        page.wait_for_load_state("load")
        super().__init__(page, url)

    def _failed(self, request: Any) -> None:
        # a navigation that turns into a download ends as "aborted": that is the download
        if "/web/download/" in request.url and request.failure == "net::ERR_ABORTED":
            return
        self.problems.append(f"failed {request.url}: {request.failure}")

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.problems.append(f"console {message.type}: {message.text}")

    def status(self) -> str:
        return str(self.page.locator("#status").inner_text())

    def clean(self) -> list[str]:
        violations = self.page.evaluate("window.__violations")
        return [*self.problems, *(f"CSP {v}" for v in violations)]


def open_page(browser: Any, server: ServeProcess, **options: Any) -> tuple[Any, Watched]:
    context = browser.new_context(accept_downloads=True, **options)
    return context, Watched(context, f"http://127.0.0.1:{server.port}")


def send_file_between(sender: Watched, receiver: Watched, source: Path, saved: Path) -> None:
    """`source` from one page to the other, saved at `saved`."""
    sender.by_id("send-file").set_input_files(str(source))
    sender.by_id("send-button").click()
    receiver.by_id("receive-code").fill(sender.code())
    receiver.by_id("receive-button").click()
    with receiver.page.expect_download() as download:
        receiver.by_id("accept-button").click()
    receiver.wait_state("done")
    sender.wait_state("done")
    download.value.save_as(saved)
