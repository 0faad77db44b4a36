"""The page in a Playwright tab with everything that went wrong in it recorded (console
errors and warnings, uncaught exceptions, failed requests, CSP violations), and
`pigeonhole serve` for it: shared by tests/web/test_web_page_*."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from process_support import ServeProcess

#: recorded in the page before its own scripts run (Playwright's init script, outside the CSP)
WATCH_CSP = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""
CODE = re.compile(r"^\d+-[a-z]+-[a-z]+$")


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
