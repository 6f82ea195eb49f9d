"""``--serve`` (views/serve.py): the page on 127.0.0.1 only, that one page and nothing else, only to requests that
name this loopback server, with its Content-Security-Policy as a header too."""

from __future__ import annotations

import http.client

import pytest

from vtm_dynamics.views.serve import serve_in_thread
from vtm_dynamics.views.web_page import CSP

PAGE = b"<!DOCTYPE html><html><body>a view</body></html>"


@pytest.fixture(scope="module")
def server():
    srv, thread = serve_in_thread(PAGE)
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


def _get(server, path="/", host=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    headers = {"Host": host} if host is not None else {}
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def test_it_listens_on_loopback_only_and_serves_the_page(server):
    assert server.server_address[0] == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
    response, body = _get(server)
    assert response.status == 200 and body == PAGE
    assert response.getheader("Content-Security-Policy") == CSP
    assert response.getheader("Content-Type") == "text/html; charset=utf-8"
    head, nobody = _get(server, method="HEAD")
    assert head.status == 200 and nobody == b"" and head.getheader("Content-Length") == str(len(PAGE))


@pytest.mark.parametrize("path", ["/etc/passwd", "/../../etc/passwd", "/index.html/..", "/%2e%2e/etc/passwd", "/view.html"])
def test_no_other_path_is_served(server, path):
    assert _get(server, path)[0].status == 404


@pytest.mark.parametrize("host", ["evil.example.org", "evil.example.org:80", "192.168.1.2:8000", ""])
def test_a_request_for_another_host_is_refused(server, host):
    """A page elsewhere that rebinds its name to 127.0.0.1 still sends its own name as Host."""
    assert _get(server, host=host)[0].status == 403
    port = server.server_address[1]
    assert _get(server, host=f"localhost:{port}")[0].status == 200
