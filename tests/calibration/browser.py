"""Pages checked in headless Chromium (the report, compare and drill-down tests): a probe script writes what it
found into <pre id="rr-check">, which --dump-dom returns."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`; .ci/run installs it)"
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0")
"""Headless, its console on stderr (`console`)."""


def load_check(fields: str, *, first: str = "") -> str:
    """A probe for a page's <head>: once the page has loaded, its images (how many, the alt of each broken one)
    and script errors, with `fields` (JavaScript object entries, after `first` ran), as JSON in <pre id="rr-check">."""
    return f"""<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || (e.target && e.target.src))), true);
window.addEventListener("load", () => {{
  const images = Array.from(document.images);
  const broken = images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt);
  {first}
  const out = document.createElement("pre");
  out.id = "rr-check";
  out.textContent = JSON.stringify({{images: images.length, broken: broken, errors: window.__errors, {fields}}});
  document.body.appendChild(out);
}});
</script>"""


def chromium(*args: str, user_dir: Path, virtual_time: bool = True) -> subprocess.CompletedProcess:
    """Headless Chromium with ARGS and a profile in USER_DIR; virtual_time: the page's timers run 10 s first."""
    budget = ["--virtual-time-budget=10000"] if virtual_time else []
    command = [CHROMIUM or "chromium", *FLAGS, f"--user-data-dir={user_dir}", *budget, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def dom_check(dom: subprocess.CompletedProcess) -> dict:
    """What the probe wrote into <pre id="rr-check">, read back from Chromium's --dump-dom."""
    found = re.search(r'<pre id="rr-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, f"the checker did not run; chromium said: {dom.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def console(stderr: str) -> list[str]:
    """The page's console messages Chromium logged (none on a clean page)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]
