"""A written view opened in a real headless browser (Chromium): a screenshot, or the page's own status.

Used by the tests that check a view draws the robot, and by ``tools/view_screenshots.py`` for the pictures in the
docs. Chromium runs with a fresh profile directory (removed afterwards), no sandbox (the page is our own file;
CI containers run as root), software WebGL, and every background service off (no update checks, no sync, no
QUIC), and the page's Content-Security-Policy refuses requests anyway. ``chromium_path`` is None when no
Chromium is installed (``tools/install_browser.sh`` installs Debian's package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio")
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_STATUS = re.compile(r'data-vtm-status="([^"]*)"')


class BrowserError(RuntimeError):
    """The browser is missing, failed or timed out."""


def chromium_path() -> str | None:
    """The Chromium executable (``VTM_CHROMIUM`` names one explicitly), or None."""
    explicit = os.environ.get("VTM_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(html_path: str, fragment: str, extra: list[str], size: tuple[int, int], budget_ms: int,
         timeout: float) -> subprocess.CompletedProcess:
    browser = chromium_path()
    if browser is None:
        raise BrowserError("no Chromium found (install it: tools/install_browser.sh)")
    url = "file://" + urllib.parse.quote(os.path.abspath(html_path)) + (f"#{fragment}" if fragment else "")
    profile = tempfile.mkdtemp(prefix="vtm-chromium-")
    try:
        args = [browser, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
                f"--virtual-time-budget={int(budget_ms)}", *extra, url]
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_browser_env())
        except subprocess.TimeoutExpired:
            raise BrowserError(f"chromium did not finish within {timeout:g} s") from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if out.returncode != 0:
        raise BrowserError(f"chromium exited with {out.returncode}: {out.stderr.strip()[-300:]}")
    return out


def _browser_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DISPLAY", None)  # headless: never reach for an X server
    return env


def screenshot(html_path: str, png_path: str, fragment: str = "", size: tuple[int, int] = (1280, 800),
               budget_ms: int = 8000, timeout: float = 90.0) -> str:
    """Render ``html_path`` (with URL ``#fragment``, e.g. ``t=0.05&hide=start``) and save a PNG; returns it."""
    return _render(html_path, png_path, fragment, size, budget_ms, timeout, with_status=False)[0]


def screenshot_with_status(html_path: str, png_path: str, fragment: str = "", size: tuple[int, int] = (1280, 800),
                           budget_ms: int = 8000, timeout: float = 90.0) -> tuple[str, dict]:
    """:func:`screenshot` and :func:`page_status` of the same rendering (one browser run): (the PNG, the status)."""
    png, status = _render(html_path, png_path, fragment, size, budget_ms, timeout, with_status=True)
    return png, status or {}


def _render(html_path: str, png_path: str, fragment: str, size: tuple[int, int], budget_ms: int, timeout: float,
            with_status: bool) -> tuple[str, dict | None]:
    if os.path.exists(png_path):
        os.remove(png_path)
    extra = [f"--screenshot={os.path.abspath(png_path)}"] + (["--dump-dom"] if with_status else [])
    out = _run(html_path, fragment, extra, size, budget_ms, timeout)
    if not os.path.isfile(png_path):
        raise BrowserError("chromium wrote no screenshot")
    return png_path, _status(out.stdout) if with_status else None


def page_status(html_path: str, fragment: str = "", budget_ms: int = 8000, timeout: float = 90.0) -> dict:
    """The page's ``data-vtm-status`` after it ran (ready, ready_ms, meshes, mesh_parses, mesh_errors, errors,
    console_errors, violations, t, layers)."""
    out = _run(html_path, fragment, ["--dump-dom"], (1024, 700), budget_ms, timeout)
    return _status(out.stdout)


def _status(dom: str) -> dict:
    found = _STATUS.search(dom)
    if not found:
        raise BrowserError("the page reported no status")
    import html

    text = html.unescape(found.group(1))
    return {"ready": False, "raw": text} if text == "loading" else json.loads(text)
