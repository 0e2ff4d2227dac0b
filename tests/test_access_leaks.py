"""Who may read what, end to end on a real server: two users in different groups, a collection only
one of them may read, and every path a document's text or name can leave by (the OpenAI SDK, the
documents API, the original file, summaries, batch jobs, the browser chat), plus a grant revoked
while a browser session is open. Any of these answering bob from `hr` is a leak."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from .server_helpers import start_server
from .test_browser import ARGS, CHROMIUM, pytestmark  # noqa: F401  (skip without chromium)
from .test_browser_ui import LOGIN

SALARY = ("# Salary bands\n\nThe salary band of a senior engineer is 91,500 euros a year, paid in twelve "
          "monthly instalments. Interns are paid 1,450 euros a month.\n")
TRAVEL = ("# Travel approvals\n\nTrain tickets above 180 euros need the approval of a department head before "
          "booking; cheaper tickets are booked directly in the travel portal.\n")
SALARY_Q = "What is the salary band of a senior engineer?"
TRAVEL_Q = "Who must approve train tickets above 180 euros?"
USERS = ("alice", "bob", "carol")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leaks")
    s = start_server(tmp)
    for folder, files in {"hr": {"salaries.md": SALARY, "travel-copy.md": TRAVEL},
                          "pub": {"travel.md": TRAVEL}}.items():
        (tmp / folder).mkdir()
        for name, text in files.items():
            (tmp / folder / name).write_text(text)
    # Ingests beside the running server are handed to it, collection included.
    r = s.cli("ingest", str(tmp / "hr"), "--collection", "hr")
    assert r.returncode == 0 and "owns this knowledge base" in r.stderr, r.stderr
    s.cli("ingest", str(tmp / "pub")).check_returncode()
    for name in USERS:
        s.cli("users", "add", name, "--password-stdin", stdin=f"{name}-password\n").check_returncode()
    s.cli("users", "group", "add", "hr-team", "alice").check_returncode()
    s.cli("collections", "grant", "hr-team", "hr", "read").check_returncode()
    s.cli("users", "group", "remove", "everyone", "carol").check_returncode()  # carol: in no group
    s.keys = {n: s.cli("users", "key", "create", n).stdout.strip() for n in USERS}
    s.tmp = tmp
    yield s
    s.stop()


def _client(server, user: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=server.keys[user], max_retries=0)


def _ask(server, user: str, question: str, **kw):
    return _client(server, user).chat.completions.create(
        model="appliance-rag", messages=[{"role": "user", "content": question}], max_tokens=24, temperature=0, **kw)


def _cited(answer) -> set[str]:
    return {s for c in answer.model_extra["citations"] for s in (c["source"], *c["also_in"])}


def test_the_sdk_answers_alice_from_hr_and_declines_bob(server):
    alice = _ask(server, "alice", SALARY_Q)
    assert "salaries.md" in _cited(alice)
    bob = _ask(server, "bob", SALARY_Q)
    assert "salaries.md" not in _cited(bob)
    assert bob.choices[0].message.content.startswith("The documents do not cover this question")
    streamed = _ask(server, "bob", SALARY_Q, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert "91,500" not in text and "do not cover" in text


def test_a_copy_in_a_collection_bob_may_not_read_is_never_named(server):
    bob = _ask(server, "bob", TRAVEL_Q)
    assert "travel.md" in _cited(bob) and "travel-copy.md" not in _cited(bob)
    assert {"travel.md", "travel-copy.md"} <= _cited(_ask(server, "alice", TRAVEL_Q))


def test_documents_api_and_original_files_follow_the_grants(server):
    def listed(user):
        r = httpx.get(server.url + "/v1/documents", headers={"Authorization": f"Bearer {server.keys[user]}"})
        return {d["source"] for d in r.json()["data"]}, r.json()["stats"]

    alice, _ = listed("alice")
    bob, stats = listed("bob")
    assert "salaries.md" in alice and "salaries.md" not in bob and "travel-copy.md" not in bob
    assert "hr" not in stats["collections"]
    assert listed("carol")[0] == set()
    for user, status in (("alice", 200), ("bob", 404), ("carol", 404)):
        r = httpx.get(server.url + "/documents/salaries.md", headers={"Authorization": f"Bearer {server.keys[user]}"})
        assert r.status_code == status, user
        assert ("91,500" in r.text) == (status == 200)
    assert httpx.get(server.url + "/documents/salaries.md").status_code == 401


def test_summaries_of_a_document_bob_may_not_read_are_not_found(server):
    with pytest.raises(openai.NotFoundError, match="no indexed document"):
        _client(server, "bob").chat.completions.create(
            model="appliance-summarize", messages=[{"role": "user", "content": "Summarise."}], max_tokens=24,
            extra_body={"document": "salaries.md"})
    r = _client(server, "alice").chat.completions.create(
        model="appliance-summarize", messages=[{"role": "user", "content": "Summarise."}], max_tokens=24,
        extra_body={"document": "salaries.md"})
    assert {c["source"] for c in r.model_extra["citations"]} == {"salaries.md"}


def test_batch_jobs_run_over_what_the_user_may_read(server):
    tmpl = server.tmp / "tmpl.toml"
    tmpl.write_text('instruction = "Name the topic in three words."\nover = "files"\nmax_tokens = 8\n')
    out = server.tmp / "batch-bob.jsonl"
    r = server.cli("batch", "run", str(tmpl), "--out", str(out), "--over", "salaries.md", "--as", "bob")
    assert r.returncode == 1 and "no items" in r.stderr and not out.exists()
    out = server.tmp / "batch-alice.jsonl"
    r = server.cli("batch", "run", str(tmpl), "--out", str(out), "--over", "salaries.md", "--as", "alice")
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["source"] for line in out.read_text().splitlines()] == ["salaries.md"]


def test_a_user_in_no_group_is_told_so(server):
    carol = _ask(server, "carol", SALARY_Q)
    assert "in no group" in carol.choices[0].message.content and carol.model_extra["citations"] == []


def test_uploads_go_only_to_a_collection_the_uploader_may_write(server):
    def upload(key, collection):
        return httpx.post(server.url + "/v1/documents", headers={"Authorization": f"Bearer {key}"},
                          files={"files": ("bonus.md", b"# Bonus\n\nThe 2026 bonus pool is 3.5 percent.\n")},
                          data={"collection": collection}, timeout=120)

    assert upload(server.keys["alice"], "hr").status_code == 403  # alice reads hr; uploads are for admins
    assert upload(server.key, "../hr").status_code == 400
    r = upload(server.key, "hr")
    assert r.status_code == 200 and r.json()["counts"]["new"] == 1
    bob = httpx.get(server.url + "/v1/documents", headers={"Authorization": f"Bearer {server.keys['bob']}"})
    assert "bonus.md" not in {d["source"] for d in bob.json()["data"]}
    r = server.cli("ingest", str(server.tmp / "hr"), "--collection", "Bad/Name")
    assert r.returncode == 1 and "invalid collection name" in r.stderr
    assert "no collection 'finance'" in server.cli("collections", "grant", "hr-team", "finance").stderr


def _login(browser, server, user: str):
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(server.url + "/")
    page.fill("input[type=text]", user)
    page.fill("input[type=password]", f"{user}-password")
    page.click(LOGIN)
    page.wait_for_selector("#question textarea", timeout=60_000)
    return ctx, page


def _ask_in_browser(page, question: str) -> str:
    """Ask `question` in a new conversation; returns the Sources panel's text once the answer is
    complete (saved: one more conversation listed), so no earlier stream can still overwrite it."""
    saved = page.locator("#conversations input").count()
    page.click("#new-chat")
    page.fill("#question textarea", question)
    page.click("#ask")
    page.wait_for_function(f"() => document.querySelectorAll('#conversations input').length > {saved}",
                           timeout=180_000)
    return page.inner_text("#sources")


def test_two_browser_sessions_and_a_grant_revoked_while_one_is_open(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        (a_ctx, alice), (b_ctx, bob) = _login(browser, server, "alice"), _login(browser, server, "bob")
        assert "salaries.md" in _ask_in_browser(alice, SALARY_Q)
        assert "salaries.md" not in _ask_in_browser(bob, SALARY_Q)
        assert "do not cover" in bob.inner_text("#chatbot")
        try:
            server.cli("collections", "revoke", "hr-team", "hr").check_returncode()
            assert "salaries.md" not in _ask_in_browser(alice, SALARY_Q)  # the same open session
            r = httpx.get(server.url + "/documents/salaries.md",
                          headers={"Authorization": f"Bearer {server.keys['alice']}"})
            assert r.status_code == 404  # her API key lost it at the same moment
        finally:
            server.cli("collections", "grant", "hr-team", "hr", "read").check_returncode()
        a_ctx.close()
        b_ctx.close()
        browser.close()
