"""The browser UI beyond the happy path (Chromium + Playwright, and Gradio's own API client):
Chinese locale, sessions of removed users, the busy message, admin-only handlers, citations that
open the source document."""

from __future__ import annotations

import time

import httpx
import pytest

from .server_helpers import GENERATE, metrics, start_server
from .test_browser import ANSWERED, ARGS, CHROMIUM, pytestmark  # noqa: F401  (skip without chromium)

LOGIN = "button:has-text('Login'), button:has-text('登录')"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # The model writes the answers here: Stop and the busy message are about generation.
    s = start_server(tmp_path_factory.mktemp("ui-more"), env=GENERATE)
    s.cli("users", "add", "reader", "--password-stdin", stdin="reader-password\n").check_returncode()
    s.cli("users", "add", "leaver", "--password-stdin", stdin="leaver-password\n").check_returncode()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _login(browser, server, user: str, password: str, locale: str = "en-US"):
    ctx = browser.new_context(locale=locale, extra_http_headers={"Accept-Language": locale})
    page = ctx.new_page()
    page.goto(server.url + "/")
    page.wait_for_selector("input[type=password]", timeout=60_000)
    page.fill("input[type=text]", user)
    page.fill("input[type=password]", password)
    page.click(LOGIN)
    page.wait_for_selector("#question textarea", timeout=60_000)
    return ctx, page


def test_chinese_locale_login_page_and_chat(browser, server):
    ctx = browser.new_context(locale="zh-CN", extra_http_headers={"Accept-Language": "zh-CN"})
    page = ctx.new_page()
    page.goto(server.url + "/")
    page.wait_for_selector("input[type=password]", timeout=60_000)
    assert "登录" in page.inner_text("body") and "用户名" in page.inner_text("body")
    page.fill("input[type=text]", "reader")
    page.fill("input[type=password]", "reader-password")
    page.click(LOGIN)
    page.wait_for_selector("#question textarea", timeout=60_000)
    body = page.inner_text("body")
    assert all(word in body for word in ("对话", "文档", "提问", "新对话")), body[:400]
    assert page.get_attribute("#question textarea", "placeholder") == "输入关于文档的问题…"
    page.fill("#question textarea", "默认情况下服务监听哪个端口？")
    page.click("#ask")
    page.wait_for_selector("#sources details", timeout=120_000)
    assert "zh/快速入门.md" in page.inner_text("#sources")
    assert "打开文档" in page.inner_html("#sources")
    ctx.close()


def test_citation_opens_the_source_document(browser, server):
    ctx, page = _login(browser, server, "reader", "reader-password")
    page.fill("#question textarea", "What colour badge must visitors wear?")
    page.click("#ask")
    page.wait_for_selector("#sources a.open-source", state="attached", timeout=120_000)
    href = page.get_attribute("#sources a.open-source >> nth=0", "href")
    assert href.startswith("/documents/en/security-policy.pdf#page=")
    pdf = ctx.request.get(server.url + href.split("#")[0])
    assert pdf.status == 200 and pdf.headers["content-type"] == "application/pdf" and pdf.body()[:4] == b"%PDF"
    assert ctx.request.get(server.url + "/documents/../../etc/passwd").status == 404
    anonymous = browser.new_context().request.get(server.url + "/documents/en/security-policy.pdf")
    assert anonymous.status == 401
    ctx.close()


def test_removed_user_cannot_ask_from_an_open_page(browser, server):
    ctx, page = _login(browser, server, "leaver", "leaver-password")
    server.cli("users", "remove", "leaver").check_returncode()
    page.fill("#question textarea", "What colour badge must visitors wear?")
    page.click("#ask")
    # The first event after the removal is refused with a message and ends the session; when a
    # background event (the documents list refresh) got there first, Gradio shows the login form.
    page.get_by_text("Your session has ended").or_(page.locator("input[type=password]")).first.wait_for(
        timeout=60_000)
    assert page.locator("#sources details").count() == 0  # nothing was retrieved for them
    assert page.locator("#chatbot .message").count() <= 1  # and no answer streamed
    ctx.close()


def test_non_admin_cannot_call_admin_handlers_through_gradio_api(server):
    from gradio_client import Client

    client = Client(server.url + "/", auth=("reader", "reader-password"), verbose=False)
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    refused = []
    for name in ("/on_remove", "/on_reindex", "/run", "/run_1", "/run_2"):
        if name not in endpoints:
            continue
        n_params = len(endpoints[name]["parameters"])
        args = {0: (), 1: ("en/security-policy.pdf",), 3: ("intruder", "new-password-1", True)}[n_params]
        result = client.predict(*args, api_name=name)
        message = result[0] if isinstance(result, (list, tuple)) else result
        refused.append((name, message))
    assert {n for n, _ in refused} >= {"/on_remove", "/on_reindex", "/run"}, endpoints.keys()
    assert all(m == "Administrators only." for _, m in refused), refused
    listed = httpx.get(server.url + "/v1/documents", headers={"Authorization": f"Bearer {server.key}"}).json()
    assert "en/security-policy.pdf" in {d["source"] for d in listed["data"]}  # the removal was refused, not done
    assert "intruder" not in server.cli("users", "list").stdout  # no account was created through /run


def test_busy_engine_shows_the_retry_message(browser, tmp_path):
    busy = start_server(tmp_path, env={"APPLIANCE_ENGINE__N_SEQ_MAX": "1", "APPLIANCE_ENGINE__MAX_QUEUE": "1",
                                       "APPLIANCE_ENGINE__N_CTX": "2048", **GENERATE})
    try:
        pages = [_login(browser, busy, "admin", busy.admin_password)[1] for _ in range(3)]
        for page in pages:
            page.fill("#question textarea", "What colour badge must visitors wear?")
        for page in pages:
            page.click("#ask")
        # Gradio's error toast fades after a few seconds: watch every page at once.
        deadline, found = time.monotonic() + 60, []
        while not found and time.monotonic() < deadline:
            found = [p for p in pages if p.get_by_text("Please try again in").count()]
            time.sleep(0.2)
        assert found, "no page showed the busy message"
        for page in pages:
            page.context.close()
    finally:
        busy.stop()


def _metric(server, name: str) -> float:
    return metrics(server).get(name, 0.0)  # a counter with no sample yet is 0


def _ended(server) -> float:
    return sum(_metric(server, f'appliance_requests_total{{reason="{r}"}}') for r in ("stop", "length"))


@pytest.mark.parametrize("how", ["stop button", "closing the tab"])
def test_stopping_an_answer_frees_the_engine(browser, server, how):
    """Stop (or closing the tab) cancels the generation in the engine and frees its KV cells."""
    ctx, page = _login(browser, server, "reader", "reader-password")
    page.fill("#question textarea", "Explain everything the guide says about security, backups and monitoring.")
    page.click("#ask")
    page.wait_for_function("() => { const b = document.querySelectorAll('#chatbot .message'); "
                           "return b.length >= 2 && b[b.length - 1].innerText.trim().length > 20; }", timeout=120_000)
    if _metric(server, "appliance_running") < 1:
        pytest.skip("the answer ended before it could be stopped")  # not expected with 512 tokens allowed
    cancelled, ended = _metric(server, 'appliance_requests_total{reason="cancelled"}'), _ended(server)
    page.click("#stop") if how == "stop button" else ctx.close()
    deadline = time.monotonic() + 30
    while _metric(server, "appliance_running") > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _metric(server, "appliance_running") == 0
    now_cancelled = _metric(server, 'appliance_requests_total{reason="cancelled"}')
    if now_cancelled == cancelled and _ended(server) == ended + 1:
        # The answer reached its end between the check above and the click: nothing left to stop.
        pytest.skip("the answer ended before the stop arrived")
    assert now_cancelled == cancelled + 1  # cancelled, not ended
    assert _metric(server, "appliance_kv_cells_used") == _metric(server, "appliance_kv_cells_cached")  # none live
    if how == "stop button":
        ctx.close()


def test_summarise_and_ask_about_one_document_from_the_documents_tab(browser, server):
    ctx, page = _login(browser, server, "reader", "reader-password")
    page.get_by_role("tab", name="Documents").click()
    page.fill("#doc-source textarea, #doc-source input", "no-such-document.md")
    page.click("#doc-summarise")
    page.get_by_text("no indexed document").wait_for(timeout=60_000)
    page.locator("#documents").get_by_text("en/security-policy.pdf", exact=True).first.click()
    page.wait_for_function("() => document.querySelector('#doc-source textarea, #doc-source input').value"
                           " === 'en/security-policy.pdf'", timeout=30_000)
    page.click("#doc-summarise")
    page.wait_for_selector("#doc-sources details", timeout=180_000)
    assert "en/security-policy.pdf" in page.inner_text("#doc-sources")
    page.wait_for_function("() => document.querySelector('#doc-answer').innerText.trim().length > 0")
    page.click("#doc-stop")  # the summary may still be streaming: Stop ends it and frees its KV
    ctx.close()
