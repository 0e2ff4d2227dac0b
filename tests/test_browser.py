"""The UI in Debian's Chromium (headless, Playwright): login, ask, streamed answer with a
cited source (file and page), log out. Every request the page makes must stay on our origin."""

import shutil
from pathlib import Path

import pytest

from .conftest import ROOT
from .server_helpers import start_server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
ARTIFACTS = ROOT / "test-artifacts"
# An answer is showing: the chat holds the question and a reply with text in it.
ANSWERED = ("() => { const b = document.querySelectorAll('#chatbot .message'); "
            "return b.length >= 2 && b[b.length - 1].innerText.trim().length > 0; }")

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("ui"))
    yield s
    s.stop()


def test_login_ask_cited_answer_logout(server):
    login_ask_cited_answer_logout(server, quoted=True)


def login_ask_cited_answer_logout(server, quoted: bool) -> None:
    """Log in, ask, check the sources (and, for the embedded model's quoted answer, the fact), log out.
    A front-end over a cluster does not know the cluster's model size, so its model writes (`quoted` False)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.goto(server.url + "/")
        page.fill("input[type=text]", "admin")
        page.fill("input[type=password]", server.admin_password)
        page.click("button:has-text('Login')")
        page.wait_for_selector("#question textarea", timeout=60_000)
        page.fill("#question textarea", "What colour badge must visitors wear?")
        page.click("#ask")
        page.wait_for_selector("#sources details", timeout=120_000)
        page.wait_for_function(ANSWERED, timeout=120_000)
        sources = page.inner_text("#sources")
        assert "en/security-policy.pdf" in sources and "page 2" in sources
        if quoted:  # the embedded model's default: the fact itself, quoted
            assert "red badge" in page.inner_text("#chatbot")
            # Once the answer is complete, the excerpts it does not quote are marked as such.
            page.wait_for_selector("#sources .not-cited", timeout=60_000)
            assert "searched, not cited" in page.inner_text("#sources")
        page.click("#sources summary >> nth=0")
        assert "red badge" in page.inner_text("#sources")
        page.screenshot(path=str(ARTIFACTS / "chat.png"))
        page.click("#logout")
        page.wait_for_selector("input[type=password]", timeout=30_000)
        browser.close()
    foreign = sorted({u for u in requests if not u.startswith(server.url)})
    assert not foreign, foreign
    assert (ARTIFACTS / "chat.png").stat().st_size > 10_000
