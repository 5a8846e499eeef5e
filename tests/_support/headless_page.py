"""One page in headless Chromium, driven over the DevTools protocol through a pipe (stdlib only).

``--dump-dom`` says what a page holds, not where it is drawn: the MLflow runs table (ag-grid) keeps columns in
its DOM that lie past the window's right edge or under a side panel. A test that checks what a user *sees* at a
given window width needs the geometry, so it asks the page itself (``getBoundingClientRect``) over the
DevTools protocol. ``--remote-debugging-pipe`` carries the protocol on file descriptors 3 (commands in) and 4
(replies and events out), one JSON message per NUL-terminated chunk: no port, no websocket client.
POSIX only (file descriptors placed with ``dup2``), as the browser tests are.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any


class PageError(RuntimeError):
    """The browser answered a command with an error, closed the pipe, or did not answer in time."""


class HeadlessPage:
    """``with HeadlessPage(chromium, workdir, 1400, 900) as page: page.goto(url); page.evaluate("1 + 1")``."""

    def __init__(self, chromium: str, workdir: Path, width: int, height: int) -> None:
        self.chromium, self.workdir, self.width, self.height = chromium, workdir, width, height
        self._next_id = 0
        self._buffer = b""
        self._session: str | None = None

    def __enter__(self) -> HeadlessPage:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the browser's ends go to fds 3 and 4 in the child; moved past 9 first, so that neither is 3 or 4 already
        # (one dup2 would then close the other), and closed on exec (only 3 and 4 reach the browser)
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w)]
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)

        def place() -> None:  # in the child, before exec
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        args = [
            "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={self.workdir / 'profile'}", f"--window-size={self.width},{self.height}",
            "--remote-debugging-pipe", "about:blank",
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            [self.chromium, *args],
            preexec_fn=place,  # two dup2 calls: no lock taken
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for fd in ends:
            os.close(fd)
        try:
            targets = self.send("Target.getTargets", browser=True)["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            self._session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True},
                                      browser=True)["sessionId"]  # fmt: skip
            size = {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False}
            self.send("Emulation.setDeviceMetricsOverride", size)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with contextlib.suppress(OSError):
            os.write(self._to_browser, json.dumps({"id": -1, "method": "Browser.close"}).encode() + b"\0")
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=20)
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)

    def send(
        self, method: str, params: dict[str, Any] | None = None, browser: bool = False, timeout: float = 60.0
    ) -> Any:
        """Send one command (to the page, or with ``browser`` to the browser) and return its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if not browser and self._session is not None:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise PageError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self, deadline: float, method: str) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise PageError(f"{method}: no answer from the browser in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise PageError(f"{method}: the browser closed the pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise PageError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float) -> Any:
        """Poll ``expression`` until it is truthy; its value, or :class:`PageError` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise PageError(f"still false after {timeout:.0f} s: {expression[:200]}")
            time.sleep(0.5)

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
