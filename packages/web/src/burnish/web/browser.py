"""Headless Chromium driven through the DevTools protocol (a WebSocket of JSON messages), to
check an export in a real browser: load a page, evaluate JavaScript, move the mouse, take a
screenshot. Needs Chromium (Debian: ``apt install chromium``) and ``websockets``
(``pip install "burnish-web[browser]"``)."""

from __future__ import annotations

import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Flags that keep Chromium off the network and quiet (no updates, sync or first-run pages).
QUIET = ("--headless", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--disable-default-apps",
         "--mute-audio", "--hide-scrollbars",
         # Containers often give /dev/shm a few MB, too little for the renderer.
         "--disable-dev-shm-usage")
#: Flags that give WebGPU a software adapter (SwiftShader) where the machine has no GPU.
SOFTWARE_WEBGPU = ("--enable-unsafe-webgpu", "--enable-features=Vulkan",
                   "--use-angle=swiftshader", "--use-webgpu-adapter=swiftshader")
#: Flags that take WebGPU away (the CPU fallback's checks).
NO_WEBGPU = ("--disable-features=WebGPU", "--disable-gpu")


class BrowserError(RuntimeError):
    """Chromium could not start, or JavaScript it ran threw."""


def find_chromium() -> str | None:
    """Chromium's executable: ``$BURNISH_CHROMIUM`` (a path or a name on the PATH), else
    ``chromium`` or ``chromium-browser`` on the PATH; None when there is none."""
    named = os.environ.get("BURNISH_CHROMIUM")
    if named:
        return shutil.which(named)
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One headless Chromium with one page. ``webgpu``: on SwiftShader's adapter, or off."""

    def __init__(self, webgpu: bool = True, executable: str | None = None,
                 size: tuple[int, int] = (900, 700), timeout: float = 60.0):
        from websockets.sync.client import connect

        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError("chromium not installed (Debian: apt install chromium; or set "
                               "BURNISH_CHROMIUM)")
        self.timeout = timeout
        self._stack = contextlib.ExitStack()
        self._profile = tempfile.mkdtemp(prefix="burnish-chromium-")
        flags = [*QUIET, *(SOFTWARE_WEBGPU if webgpu else NO_WEBGPU),
                 f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
                 f"--window-size={size[0]},{size[1]}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to run its sandbox as root
        # Its log goes to a file: a pipe nobody reads would fill and stall it.
        self._log = Path(self._profile) / "chromium.log"
        with self._log.open("wb") as log:
            self._process = subprocess.Popen([executable, *flags, "about:blank"],
                                             stdout=subprocess.DEVNULL, stderr=log)
        try:
            port = self._port()
            targets = json.loads(urllib.request.urlopen(
                f"http://127.0.0.1:{port}/json/list", timeout=timeout).read())
            page = next(t for t in targets if t.get("type") == "page")
            self._socket = self._stack.enter_context(connect(
                page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout))
        except BaseException:
            self.close()
            raise
        self._next = 0
        self.events: list[dict] = []
        self.send("Page.enable")
        self.send("Runtime.enable")

    def _port(self) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                error = self._log.read_text(errors="replace")[-2000:]
                raise BrowserError(f"chromium exited with status {self._process.returncode}: "
                                   f"{error}")
            if marker.exists():
                lines = marker.read_text().split()
                if lines:
                    return int(lines[0])
            time.sleep(0.05)
        raise BrowserError(f"chromium did not open its DevTools port in {self.timeout:.0f} s")

    def send(self, method: str, **params: Any) -> dict:
        """One DevTools command; its result (events that arrive meanwhile go to ``events``)."""
        self._next += 1
        ident = self._next
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"chromium did not answer {method} in {self.timeout:.0f} s")
            message = json.loads(self._socket.recv(timeout=left))
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error'].get('message')}")
                return message.get("result", {})
            self.events.append(message)

    def goto(self, url: str) -> None:
        """Open ``url`` and wait for its load event."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load in {self.timeout:.0f} s")
            self.send("Runtime.evaluate", expression="0")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited), as JSON gives it."""
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript threw: {text}")
        return result["result"].get("value")

    def console(self) -> list[str]:
        """What the page logged to its console so far."""
        return [" ".join(str(a.get("value", a.get("description", ""))) for a in
                         e["params"].get("args", []))
                for e in self.events if e.get("method") == "Runtime.consoleAPICalled"]

    def mouse(self, kind: str, x: float, y: float) -> None:
        """A mouse event at page coordinates: ``kind`` is pressed, moved or released."""
        self.send("Input.dispatchMouseEvent", type=f"mouse{kind.capitalize()}", x=x, y=y,
                  button="left", buttons=0 if kind == "released" else 1, clickCount=1)

    def screenshot(self, path: str | os.PathLike[str]) -> Path:
        """The page as a PNG at ``path``."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        target = Path(path)
        target.write_bytes(base64.b64decode(data))
        return target

    def close(self) -> None:
        self._stack.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base's name)
        pass


@contextlib.contextmanager
def serve(directory: str | os.PathLike[str]) -> Iterator[str]:
    """An HTTP server for ``directory`` on a free loopback port, for the ``with`` block;
    yields its base URL (``http://127.0.0.1:PORT/``). Pages that import ES modules and fetch
    files need one: browsers refuse both from ``file://``."""
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
