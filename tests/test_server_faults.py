"""`kill -9` of a real server mid-stream and mid-upload, then a restart: the index is whole (store ids =
chunk rows = manifest ids), users and conversations are intact, and the interrupted upload completes
on a re-index (RELIABILITY.md)."""

from __future__ import annotations

import sqlite3
import threading
import time

import httpx
import pytest

from appliance.server.history import HistoryStore

from .server_helpers import start_server

# ~6 chunks a file: 90 files make three embedding groups (knowledge.ingest.folder._EMBED_GROUP), so the kill
# lands while a later group is embedded, not in the quick burst of commits that ends a group (30
# files were one group, and on a fast machine its commits all landed between two polls).
_FILES, _PARAGRAPHS = 90, 40


def _uploads(n: int) -> list[tuple[str, tuple[str, bytes, str]]]:
    """Distinct documents large enough that indexing them takes the server many seconds."""
    files = []
    for i in range(n):
        body = "\n\n".join(f"Procedure {i}-{p}: form {i * 100 + p} is filed with office {p % 7} "
                           f"within {p + i} days, and copies go to archive shelf {i}{p}." for p in range(_PARAGRAPHS))
        files.append(("files", (f"procedure-{i}.md", f"# Procedure {i}\n\n{body}\n".encode(), "text/markdown")))
    return files


def _indexed_uploads(data) -> int:
    conn = sqlite3.connect(f"file:{data / 'knowledge.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM files WHERE source LIKE 'procedure-%' AND status = 'done'"
                            ).fetchone()[0]
    finally:
        conn.close()


def _index_line(server) -> str:
    out = server.cli("doctor").stdout
    return next(line for line in out.splitlines() if "index" in line and "vectors" in line)


def test_kill_9_mid_stream_and_mid_upload_loses_nothing(tmp_path):
    server = start_server(tmp_path)
    data = server.data
    try:
        assert server.cli("users", "add", "bob", "--password-stdin", stdin="bobs-password\n").returncode == 0
        bob_key = server.cli("users", "key", "create", "bob").stdout.strip()
        conv = HistoryStore(data / "users.db").save("bob", None, [{"role": "user", "content": "Where is parking?"},
                                                                  {"role": "assistant", "content": "Level -2."}])
        admin = {"Authorization": f"Bearer {server.key}"}

        # 1. mid-stream: the client sees the connection drop, nothing else.
        body = {"model": "appliance-rag", "stream": True, "max_tokens": 300, "answer_style": "generate",
                "messages": [{"role": "user", "content": "How do I back up the appliance?"}]}
        events = 0
        with pytest.raises(httpx.HTTPError), httpx.stream(  # noqa: PT012 - the kill happens mid-iteration
                "POST", server.url + "/v1/chat/completions", headers=admin, json=body, timeout=60) as r:
            for line in r.iter_lines():
                events += line.startswith("data: ")
                if events == 3:
                    server.proc.kill()
        assert events >= 3
        server.proc.wait(30)

        # 2. mid-upload: killed while the server is indexing the uploaded files.
        server = start_server(tmp_path, data=data)
        admin = {"Authorization": f"Bearer {server.key}"}
        upload = threading.Thread(target=_post_quietly, args=(server.url, admin, _uploads(_FILES)), daemon=True)
        upload.start()
        deadline = time.monotonic() + 300
        while _indexed_uploads(data) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        server.proc.kill()
        server.proc.wait(30)
        interrupted_at = _indexed_uploads(data)
        assert 2 <= interrupted_at < _FILES  # the kill really landed mid-ingest

        # 3. restart: repaired at start, everything there.
        server = start_server(tmp_path, data=data)
        admin = {"Authorization": f"Bearer {server.key}"}
        assert "│ ok" in _index_line(server)
        assert HistoryStore(data / "users.db").get("bob", conv)[1]["content"] == "Level -2."
        assert httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {bob_key}"}).status_code == 200
        r = httpx.post(server.url + "/v1/documents/reindex", headers=admin, timeout=600)
        assert r.status_code == 200
        assert _indexed_uploads(data) == _FILES
        answer = httpx.post(server.url + "/v1/chat/completions", headers=admin, timeout=120, json={
            "model": "appliance-rag", "max_tokens": 20, "messages": [{"role": "user", "content": "Procedure 7-3?"}]})
        assert answer.status_code == 200 and answer.json()["citations"]
        assert "│ ok" in _index_line(server)
    finally:
        server.stop()


def _post_quietly(url: str, headers: dict, files: list) -> None:
    try:
        httpx.post(url + "/v1/documents", headers=headers, files=files, timeout=600)
    except httpx.HTTPError:
        pass  # the server is killed under it: expected
