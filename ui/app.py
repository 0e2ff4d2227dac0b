"""The Gradio UI, mounted into the FastAPI app. It calls the same services as the API.

Air-gap rules: system fonts only (no web fonts), analytics off, no SSR node server.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from appliance.engine.errors import EngineOverloaded  # noqa: E402
from appliance.server.services import Services  # noqa: E402
from knowledge.errors import KnowledgeError  # noqa: E402
from ui.admin import build_admin_tab  # noqa: E402
from ui.render import render_report, render_sources  # noqa: E402

THEME = gr.themes.Base(font=["system-ui", "-apple-system", "Segoe UI", "sans-serif"],
                       font_mono=["ui-monospace", "Menlo", "Consolas", "monospace"])
UPLOAD_TYPES = [".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm", ".md", ".txt"]


def _user(request: gr.Request) -> str:
    return request.username or "anonymous"


def build_ui(svc: Services) -> gr.Blocks:
    """The Blocks app: chat with sources and history, documents, admin."""
    with gr.Blocks(title="Knowledge appliance", analytics_enabled=False) as demo:
        conv_id = gr.State(None)
        with gr.Row():
            gr.Markdown("## Knowledge appliance")
            gr.Button("Log out", link="/logout", size="sm", scale=0, elem_id="logout")
        with gr.Tab("Chat"):
            with gr.Row():
                with gr.Column(scale=1, min_width=200):
                    new_btn = gr.Button("New chat", elem_id="new-chat")
                    convs = gr.Radio(label="Conversations", choices=[], elem_id="conversations")
                    del_btn = gr.Button("Delete chat", variant="stop", size="sm")
                with gr.Column(scale=3):
                    chat = gr.Chatbot(label="Answer", height=460, elem_id="chatbot")
                    with gr.Row():
                        box = gr.Textbox(placeholder="Ask a question about your documents…", show_label=False,
                                         scale=5, elem_id="question")
                        send = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                        stop = gr.Button("Stop", variant="secondary", scale=0, elem_id="stop")
                with gr.Column(scale=2, min_width=260):
                    sources = gr.HTML("<p>Sources appear here.</p>", label="Sources", elem_id="sources")

        def ask(question: str, history: list, cid: str | None, request: gr.Request):
            user = _user(request)
            question = (question or "").strip()
            if not question:
                yield history, gr.update(), cid, gr.update(), ""
                return
            messages = [{"role": m["role"], "content": _text(m["content"])} for m in history]
            messages.append({"role": "user", "content": question})
            prepared = svc.chat.prepare(messages)
            html = render_sources(prepared.citations, prepared.covered)
            answer = ""
            yield [*messages, {"role": "assistant", "content": answer}], html, cid, gr.update(), ""
            try:
                # Closing the tab or pressing Stop closes this generator; the stream's `finally`
                # then cancels the request in the engine and frees its KV cells.
                for delta in svc.chat.stream(prepared, svc.chat.answer_params(user)):
                    answer += delta
                    # A new list each time: Gradio streams the difference from the previous value.
                    yield [*messages, {"role": "assistant", "content": answer}], html, cid, gr.update(), ""
            except EngineOverloaded as e:
                raise gr.Error(f"The server is busy answering other questions. Please try again in "
                               f"{int(e.retry_after + 0.999)} s.", title="Busy") from None
            final = [*messages, {"role": "assistant", "content": answer}]
            cid = svc.history.save(user, cid, [*messages, {"role": "assistant", "content": answer,
                                                           "citations": prepared.citations}])
            yield final, html, cid, _conv_choices(svc, user, cid), ""

        # Every browser user's question reaches the engine at once (it batches them and answers
        # 503-style when full); Gradio's default would serve one event at a time.
        limit = svc.settings.engine.n_seq_max + svc.settings.engine.max_queue
        asks = [trigger(ask, [box, chat, conv_id], [chat, sources, conv_id, convs, box],
                        concurrency_limit=limit, concurrency_id="ask") for trigger in (send.click, box.submit)]
        stop.click(None, None, None, cancels=asks)

        def load_conv(choice: str | None, request: gr.Request):
            if not choice:
                return [], "<p>Sources appear here.</p>", None
            msgs = svc.history.get(_user(request), choice)
            last = next((m.get("citations") for m in reversed(msgs) if m.get("citations")), [])
            return [{"role": m["role"], "content": m["content"]} for m in msgs], render_sources(last, True), choice

        convs.input(load_conv, [convs], [chat, sources, conv_id])
        new_btn.click(lambda: ([], "<p>Sources appear here.</p>", None, gr.update(value=None)),
                      None, [chat, sources, conv_id, convs])

        def delete(cid: str | None, request: gr.Request):
            if cid:
                svc.history.delete(_user(request), cid)
            return [], "<p>Sources appear here.</p>", None, _conv_choices(svc, _user(request), None)

        del_btn.click(delete, [conv_id], [chat, sources, conv_id, convs])
        def on_load(request: gr.Request):
            return _conv_choices(svc, _user(request), None)

        demo.load(on_load, None, [convs])
        _documents_tab(svc)
        build_admin_tab(svc)
    return demo


def _conv_choices(svc: Services, user: str, selected: str | None):
    choices = [(title, cid) for cid, title in svc.history.list(user)]
    return gr.update(choices=choices, value=selected)


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def _documents_tab(svc: Services) -> None:
    docs_svc = svc.documents
    admin_only = svc.settings.upload_requires_admin
    with gr.Tab("Documents"):
        files = gr.File(label="Upload documents", file_count="multiple", file_types=UPLOAD_TYPES)
        go = gr.Button("Upload and index", variant="primary")
        summary = gr.Markdown()

        def is_admin(request: gr.Request) -> bool:
            user = svc.users.get(_user(request))
            return bool(user and user.is_admin)

        def upload(paths: list[str] | None, request: gr.Request, progress=gr.Progress()):
            if admin_only and not is_admin(request):
                return "Only administrators can upload documents."
            if not paths:
                return "Choose files first."
            progress(0.1, desc="indexing")
            return render_report(docs_svc.upload((Path(p).name, Path(p)) for p in paths))

        go.click(upload, [files], [summary])
        docs = gr.Dataframe(headers=["source", "status", "chunks", "error", "root"], interactive=False,
                            label="Indexed documents")
        with gr.Row():
            target = gr.Textbox(label="Source to remove", scale=3)
            remove = gr.Button("Remove", variant="stop", scale=1)
            reindex = gr.Button("Re-index all folders", scale=1)

        def listing(request: gr.Request):
            return [[r.source, r.status, len(r.chunk_ids), r.error or "", r.root] for r in docs_svc.list()]

        def do_remove(source: str) -> str:
            try:
                return f"Removed {len(docs_svc.remove(source))} document(s)."
            except KnowledgeError as e:
                return str(e)

        def do_reindex() -> str:
            return "\n\n".join(render_report(r) for r in docs_svc.reindex())

        def on_remove(source: str, request: gr.Request):
            return (do_remove(source) if is_admin(request) else "Administrators only."), listing(request)

        def on_reindex(request: gr.Request):
            return (do_reindex() if is_admin(request) else "Administrators only."), listing(request)

        remove.click(on_remove, [target], [summary, docs])
        reindex.click(on_reindex, None, [summary, docs])
        gr.Timer(15.0).tick(listing, None, [docs])


def mount_ui(app, svc: Services) -> None:
    """Mount the UI at / with login through the appliance's user store."""

    def check(username: str, password: str) -> bool:
        try:
            svc.users.login(username, password)
            return True
        except Exception:  # noqa: BLE001 - wrong password and lockout both mean "no"
            return False

    demo = build_ui(svc)
    # The queue holds what the engine can run plus what it would queue; beyond that Gradio refuses.
    demo.queue(max_size=svc.settings.engine.n_seq_max + svc.settings.engine.max_queue)
    max_bytes = int(svc.settings.knowledge.max_file_mb * 2**20)  # refused before anything is written
    gr.mount_gradio_app(app, demo, path="", max_file_size=max_bytes, auth=check, ssr_mode=False, theme=THEME,
                        footer_links=[], auth_message="Knowledge appliance: log in with your account.")
