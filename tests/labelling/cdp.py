"""Headless Chromium driven over the Chrome DevTools Protocol: enough to log in, open a page, read the DOM,
press keys and take a screenshot.

The protocol is JSON over a websocket; aiohttp (already a dependency, through openai[aiohttp]) speaks
websocket, so no browser-automation package is needed (playwright and selenium download their own browsers
or drivers, which cannot happen offline). Chromium is started with its own profile folder and a free
debugging port (it writes the port into DevToolsActivePort) and is stopped, with its process group, at the end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.processes import stop

SHIFTED_DIGITS = "!@#$%^&*()"  # shift and 1, 2, ... 0 on a US keyboard
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Page:
    """One tab of a headless Chromium."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self._ws = ws
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._ws:
            reply = json.loads(message.data)
            future = self._waiting.pop(reply.get("id"), None)
            if future is not None and not future.done():
                future.set_result(reply)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, timeout=60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def js(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited when it is a promise)."""
        reply = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]}...: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    async def wait_for(self, expression: str, *, timeout: float = 90.0) -> None:
        """Poll until the expression is truthy (in JavaScript's sense: an element found is)."""
        deadline = time.monotonic() + timeout
        while True:
            if await self.js(f"!!({expression})"):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page never satisfied {expression!r} within {timeout:.0f} s")
            await asyncio.sleep(0.25)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    async def press(self, combo: str) -> None:
        """A key as a person types it on a US keyboard (`q`, `1`, `shift+1`): keydown with its text, then keyup,
        sent to the focused element."""
        shift = combo.startswith("shift+")
        base = combo.removeprefix("shift+")
        code = f"Digit{base}" if base.isdigit() else f"Key{base.upper()}"
        key = SHIFTED_DIGITS["1234567890".index(base)] if shift and base.isdigit() else base.upper() if shift else base
        vk = ord(base.upper())
        event = {
            "key": key,
            "code": code,
            "windowsVirtualKeyCode": vk,
            "nativeVirtualKeyCode": vk,
            "modifiers": 8 if shift else 0,
        }
        await self.send("Input.dispatchKeyEvent", type="keyDown", text=key, **event)
        await self.send("Input.dispatchKeyEvent", type="keyUp", **event)

    async def click(self, x: float, y: float) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def resize(self, width: int, height: int) -> None:
        """The viewport's size in CSS pixels (the page lays itself out again)."""
        await self.send(
            "Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False
        )

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


@contextlib.asynccontextmanager
async def chromium_page(profile: Path, *, width: int, height: int):
    """A blank page of a headless Chromium whose viewport is width x height CSS pixels."""
    profile.mkdir(parents=True, exist_ok=True)
    port_file = profile / "DevToolsActivePort"
    port_file.unlink(missing_ok=True)  # a port left by an earlier run of this profile
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        "about:blank",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not open its debugging port (exit status {proc.poll()})")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        async with aiohttp.ClientSession(trust_env=False) as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as reply:
                targets = await reply.json(content_type=None)
            target = next(t for t in targets if t.get("type") == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.send("Page.enable")
                await page.resize(width, height)
                yield page
    finally:
        stop(proc)
