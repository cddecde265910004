"""A real headless Chromium for the console's tests: Debian's ``chromium`` (``make setup`` installs
it), driven by Playwright over the DevTools protocol (Playwright's own browser builds are not
used: nothing is downloaded). Every console message of type error and every uncaught page error
is collected, so that a test can assert there were none; screenshots go under the test's tmp dir.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

CHROMIUM_NAMES = ("chromium", "chromium-browser")
TIMEOUT_MS = 30_000


def chromium_path() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("chromium is missing: run `make setup` (Debian's chromium package)")


@dataclass
class Console:
    """What a page said on its console, and where its screenshots go."""

    shots: Path
    errors: list[str] = field(default_factory=list)
    # HTTP statuses a test provokes on purpose: Chromium logs each failed request as an error.
    expected_statuses: set[int] = field(default_factory=set)

    def watch(self, page: Page) -> Page:
        page.set_default_timeout(TIMEOUT_MS)
        page.on("console", self._message)
        page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        return page

    def _message(self, message: ConsoleMessage) -> None:
        if message.type != "error":
            return
        status = re.search(r"Failed to load resource: the server responded with a status of (\d+)", message.text)
        if not (status and int(status.group(1)) in self.expected_statuses):
            self.errors.append(f"console: {message.text} ({message.location.get('url', '')})")

    def shot(self, page: Page, name: str) -> Path:
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            # No sandbox: the tests may run as root (CI), where Chromium's sandbox refuses to start.
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()
