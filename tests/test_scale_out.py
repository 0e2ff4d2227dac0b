"""Beyond one box: a front-end appliance with `engine.backend = "openai"` in front of a "cluster"
(another real appliance, an OpenAI-compatible server) and its vectors on a real `chroma run` server.

The front-end must pass the API suite's RAG, streaming, stop, usage and cancel cases, chat in
Chromium, give a clean error when the cluster dies mid-stream, and recover when it returns.
"""

import time
from pathlib import Path

import httpx
import openai
import pytest

from appliance.bench.server import scale_out_env, start_chroma

from . import test_api as api
from . import test_browser as browser
from .server_helpers import start_server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    s = start_server(tmp_path_factory.mktemp("cluster"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def chroma(tmp_path_factory):
    proc, url = start_chroma(tmp_path_factory.mktemp("chroma") / "store")
    yield url
    proc.terminate()
    proc.wait(30)


@pytest.fixture(scope="module")
def front(tmp_path_factory, cluster, chroma):
    env = {**scale_out_env(cluster, chroma), "APPLIANCE_ENGINE__REMOTE_RETRIES": "1"}
    s = start_server(tmp_path_factory.mktemp("front"), env=env)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(front):
    return openai.OpenAI(base_url=front.url + "/v1", api_key=front.key, max_retries=0)


def _stats(server) -> dict:
    return httpx.get(server.url + "/admin/stats", headers={"Authorization": f"Bearer {server.key}"}).json()["engine"]


def test_front_end_uses_the_cluster_and_the_chroma_server(front, cluster, chroma):
    snap = _stats(front)
    assert snap["backend"] == "openai" and snap["model"] == "smollm2-135m" and snap["healthy"]
    # The sample guide was indexed into the Chroma server, not into the front-end's data directory.
    assert not (front.data / "chroma").exists()
    cols = httpx.get(chroma + "/api/v2/tenants/default_tenant/databases/default_database/collections").json()
    assert [c["name"] for c in cols] == ["kb-default"]
    assert cluster.key not in front.log.read_text()  # the cluster's key is never logged


def test_api_cases_through_the_front_end(client, front, cluster):
    before = _stats(cluster)["generated_tokens"]
    api.test_models(client)
    api.test_non_streaming_usage_and_citation(client)
    api.test_not_covered_path(client)
    api.test_streaming_with_usage_and_stop(client)
    api.test_metrics_parse_and_move(front, client)
    assert _stats(cluster)["generated_tokens"] > before  # the tokens came from the cluster


def test_prompt_counting_and_multi_turn(client, cluster):
    # A second turn makes the chat service budget history through the cluster's /tokenize.
    r = client.chat.completions.create(model="appliance-rag", max_tokens=16, temperature=0, messages=[
        {"role": "user", "content": "Which port does the server listen on by default?"},
        {"role": "assistant", "content": "Port 8000 [1]."},
        {"role": "user", "content": "How do I back up the appliance?"}])
    assert r.choices[0].message.content and r.model_extra["citations"]
    t = httpx.post(cluster.url + "/tokenize", headers={"Authorization": f"Bearer {cluster.key}"},
                   json={"model": "smollm2-135m", "messages": [{"role": "user", "content": "hello"}]}).json()
    assert t["count"] == len(t["tokens"]) > 3


def test_cancel_frees_the_front_end_and_the_cluster(front, cluster):
    api.test_client_disconnect_cancels_generation(front)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _stats(cluster)["running"] > 0:
        time.sleep(0.2)
    snap = _stats(cluster)
    assert snap["running"] == 0 and snap["kv_cells_live"] == 0 and snap["requests"].get("cancelled", 0) >= 1


def test_ui_chat_in_chromium(front):
    if not Path(browser.CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    browser.login_ask_cited_answer_logout(front, quoted=False)


def test_doctor_checks_the_cluster(front):
    out = " ".join(front.cli("doctor").stdout.replace("│", " ").split())  # the table wraps long lines
    assert "chat model ok smollm2-135m on the cluster at" in out and "1 token generated" in out, out
    assert "prompts counted by messages" in out  # the cluster's /tokenize (vLLM's form)


def test_cluster_dying_mid_stream_then_returning(tmp_path, front, cluster, client):
    """Last: it kills the cluster. The client gets an error event, the front-end keeps serving, and
    answers again once the cluster is back on its address."""
    stream = client.chat.completions.create(model="smollm2-135m", max_tokens=400, stream=True, messages=[
        {"role": "user", "content": "Write a very long story about a lighthouse."}])
    with pytest.raises(openai.APIError) as err:
        for n, _ in enumerate(stream):
            if n == 3:
                cluster.proc.kill()
    assert "mid-stream" in str(err.value) or "stopped" in str(err.value)
    # While it is away: a quick 503 with Retry-After, /healthz says why, the UI page still loads.
    r = httpx.post(front.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {front.key}"},
                   json={"model": "smollm2-135m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
                   timeout=60)
    assert r.status_code == 503 and r.headers["Retry-After"] and "cannot reach" in r.json()["error"]["message"]
    health = httpx.get(front.url + "/healthz").json()
    assert health["status"] == "degraded" and "unreachable" in health["reasons"][0]
    assert httpx.get(front.url + "/").status_code == 200
    port = int(cluster.url.rsplit(":", 1)[1])
    back = start_server(tmp_path / "again", data=cluster.data, port=port)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and httpx.get(front.url + "/healthz").json()["status"] != "ok":
            time.sleep(1)
        assert httpx.get(front.url + "/healthz").json()["status"] == "ok"
        r = client.chat.completions.create(model="smollm2-135m", max_tokens=8,
                                           messages=[{"role": "user", "content": "Say hello."}])
        assert r.choices[0].message.content
    finally:
        back.stop()



def test_a_busy_cluster_is_passed_on_with_its_retry_after(tmp_path):
    """The front-end's own cap answers overloaded before asking the cluster; the cluster's 503 reaches
    the caller as EngineOverloaded with the cluster's Retry-After."""
    from appliance.engine.errors import EngineOverloaded
    from appliance.engine.remote import RemoteBackend, RemoteOptions
    from appliance.engine.sequence import SamplingParams

    small = start_server(tmp_path, "--no-ui", env={"APPLIANCE_ENGINE__N_SEQ_MAX": "1",
                                                   "APPLIANCE_ENGINE__MAX_QUEUE": "2",
                                                   "APPLIANCE_KNOWLEDGE__SAMPLE_DOCS": "false"})
    story = [{"role": "user", "content": "Write a very long story about a lighthouse."}]
    params = SamplingParams(max_tokens=400, ignore_eos=True)
    try:
        with RemoteBackend(RemoteOptions(url=small.url, key=small.key, max_streams=2)) as capped, \
                RemoteBackend(RemoteOptions(url=small.url, key=small.key)) as wide:
            open_ = [capped.submit(story, params), capped.submit(story, params)]  # running + 1 waiting
            with pytest.raises(EngineOverloaded, match="open to the cluster"):
                capped.submit(story, params)
            open_.append(wide.submit(story, params))  # the cluster's second waiting place
            with pytest.raises(EngineOverloaded, match="cluster is busy") as busy:
                wide.submit(story, params)
            assert busy.value.retry_after >= 1
            assert capped.snapshot()["requests_rejected"] == 1 and wide.snapshot()["requests_rejected"] == 1
            for req in open_:
                req.cancel()
    finally:
        small.stop()
