"""Browser hardening, measured in Chromium on a server configured as behind an HTTPS proxy
(`server.https_proxy = true`): the page works under its CSP with no violation through every tab,
nothing can frame it, every response carries the headers, and the session cookies are Secure."""

from __future__ import annotations

import http.server
import threading
from contextlib import contextmanager

import httpx
import pytest

from .server_helpers import start_server
from .test_browser import ARGS, CHROMIUM, pytestmark  # noqa: F401  (skip without chromium)
from .test_browser_ui import ANSWERED, LOGIN

# Recorded in the page before any of its scripts run: every CSP violation the browser reports.
WATCH = """window.__csp = []; document.addEventListener('securitypolicyviolation',
  e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("hardened"), env={"APPLIANCE_SERVER__HTTPS_PROXY": "true"})
    yield s
    s.stop()


def test_every_response_carries_the_security_headers(server):
    auth = {"Authorization": f"Bearer {server.key}"}
    for path, headers in (("/", {}), ("/v1/models", auth), ("/documents/en/getting-started.md", auth),
                          ("/healthz", {})):
        r = httpx.get(server.url + path, headers=headers)
        assert r.status_code < 500, path
        h = r.headers
        assert h["x-content-type-options"] == "nosniff", path
        assert "frame-ancestors 'none'" in h["content-security-policy"], path
        assert h["x-frame-options"] == "DENY" and h["referrer-policy"] == "no-referrer", path
        assert h["strict-transport-security"].startswith("max-age="), path
    assert "default-src 'none'" in httpx.get(server.url + "/documents/en/getting-started.md",
                                             headers=auth).headers["content-security-policy"]


def test_login_cookies_are_secure_behind_the_https_proxy(server):
    r = httpx.post(server.url + "/login", data={"username": "admin", "password": server.admin_password})
    cookies = r.headers.get_list("set-cookie")
    assert len(cookies) == 2, cookies  # Gradio's two session cookies
    for cookie in cookies:
        attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
        assert {"secure", "httponly", "samesite=lax"} <= attrs and "samesite=none" not in attrs, cookie


def test_the_page_works_under_its_csp_and_cannot_be_framed(server):
    from playwright.sync_api import sync_playwright

    console: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = browser.new_context()
        ctx.add_init_script(WATCH)
        page = ctx.new_page()
        page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
        page.goto(server.url + "/")
        page.fill("input[type=text]", "admin")
        page.fill("input[type=password]", server.admin_password)
        page.click(LOGIN)  # Secure cookies on http://127.0.0.1: Chromium treats loopback as secure
        page.wait_for_selector("#question textarea", timeout=60_000)
        page.fill("#question textarea", "What colour badge must visitors wear?")
        page.click("#ask")
        page.wait_for_selector("#sources details", timeout=120_000)
        page.wait_for_function(ANSWERED, timeout=120_000)
        assert "en/security-policy.pdf" in page.inner_text("#sources")  # the Sources panel rendered
        for tab in ("Documents", "Account", "Admin", "Chat"):
            page.get_by_role("tab", name=tab).click()
            page.wait_for_timeout(1500)  # the admin tab's plots draw on a timer
        violations = page.evaluate("window.__csp")
        # A page of another origin tries to frame the chat: the browser refuses (frame-ancestors 'none').
        with _framing_site(server.url) as framer_url:
            framer = ctx.new_page()
            framer.goto(framer_url)
            framer.wait_for_timeout(3000)
            framed = [f.url for f in framer.frames]
        browser.close()
    assert violations == [], violations
    csp_console = [m for m in console if "Content Security Policy" in m]
    assert csp_console == [], csp_console
    assert not any(u.startswith(server.url) for u in framed), framed  # blocked: an error page stands in


@contextmanager
def _framing_site(target: str):
    """Another origin (its own loopback port) serving a page that frames `target`."""
    page = f'<html><body><iframe src="{target}/" width="600" height="400"></iframe></body></html>'.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
