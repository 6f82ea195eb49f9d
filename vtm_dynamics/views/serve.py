"""Show a written view live in a browser: an HTTP server on 127.0.0.1 that serves that one page from memory.

It listens on loopback only (no option widens it: a view is for the person at this machine; send the HTML file to
anyone else), answers ``GET``/``HEAD`` of ``/`` and nothing else (no file system behind it), refuses requests
whose ``Host`` is not this server's loopback address (a web page elsewhere cannot reach it through DNS
rebinding), and sends the page's Content-Security-Policy as a header too.
"""

from __future__ import annotations

import http.server
import threading
from typing import Callable

from vtm_dynamics.views.web_page import CSP

LOOPBACK = "127.0.0.1"


class _PageHandler(http.server.BaseHTTPRequestHandler):
    server_version = "vtm-view"
    sys_version = ""

    def _allowed_host(self) -> bool:
        port = self.server.server_address[1]
        return (self.headers.get("Host") or "").lower() in {f"127.0.0.1:{port}", f"localhost:{port}"}

    def _answer(self, body: bool) -> None:
        if not self._allowed_host():
            self.send_error(403, "only http://127.0.0.1:<port>/ is served")
            return
        if self.path.split("?", 1)[0] not in ("/", "/index.html"):
            self.send_error(404)
            return
        page = self.server.page  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if body:
            self.wfile.write(page)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(False)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: the terminal is the user's
        pass


class PageServer(http.server.ThreadingHTTPServer):
    """Serves ``page`` (bytes) on 127.0.0.1:``port`` (0: a free port); ``url`` says where."""

    daemon_threads = True

    def __init__(self, page: bytes, port: int = 0) -> None:
        super().__init__((LOOPBACK, int(port)), _PageHandler)
        self.page = page

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server_address[1]}/"


def serve_in_thread(page: bytes, port: int = 0) -> tuple[PageServer, threading.Thread]:
    """Start serving in a daemon thread; stop with ``server.shutdown(); server.server_close()``."""
    server = PageServer(page, port)
    thread = threading.Thread(target=server.serve_forever, name="vtm-view-server", daemon=True)
    thread.start()
    return server, thread


def serve_until_interrupted(page: bytes, port: int = 0, say: Callable[[str], None] = print) -> int:
    """Serve until Ctrl-C (the command-line tools' ``--serve``); returns 0."""
    server = PageServer(page, port)
    say(f"view: serving on {server.url} (loopback only); Ctrl-C stops")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        say("view: stopped")
    finally:
        server.server_close()
    return 0
