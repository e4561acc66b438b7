"""Headless Chromium for tests, driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

Nothing to install but the browser (Debian: `apt-get install chromium`): no driver, no websocket
library, no port. Tests that need it call `chromium_or_skip()`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
    # Only this machine is reachable: no name is resolved, and any other host goes to a dead local proxy.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=127.0.0.1:9",
)


def find_chromium() -> str | None:
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


def chromium_or_skip() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    return path


def save_artifact(path: Path) -> None:
    """Copy a screenshot to $ROOFLINE_ARTIFACTS when set (how docs/img/ pictures are made)."""
    folder = os.environ.get("ROOFLINE_ARTIFACTS")
    if folder:
        shutil.copyfile(path, Path(folder) / path.name)


class Browser:
    """One headless browser with one page; every event is kept in `events` for the test to read."""

    def __init__(self, executable: str, profile: Path, width: int = 1400, height: int = 900):
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def on_fds_3_and_4():  # the protocol's fixed descriptors: 3 the browser reads, 4 it writes
            read, write = os.dup(commands_read), os.dup(replies_write)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=on_fds_3_and_4,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self._session = None
        target = next(t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self._session = self.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith(("Browser.", "Target.")):
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser exited")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def goto(self, url: str, timeout: float = 30) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired", timeout)

    def wait_for_event(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._read(deadline))

    def evaluate(self, expression: str, timeout: float = 30) -> Any:
        result = self.call(
            "Runtime.evaluate", timeout=timeout, expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"never true: {expression}")

    def set_files(self, selector: str, paths: list[str]) -> None:
        """Choose files in an <input type=file>, as a person would in the dialog."""
        handle = self.call("Runtime.evaluate", expression=f"document.querySelector({json.dumps(selector)})")
        self.call("DOM.setFileInputFiles", files=paths, objectId=handle["result"]["objectId"])

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element, scrolled into view (the page's own handlers run)."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center', inline: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))
        return path

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions seen since the last navigation."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)


@pytest.fixture
def browser(tmp_path):
    page = Browser(chromium_or_skip(), tmp_path / "chromium-profile")
    yield page
    page.close()
