"""The chat tab: streamed answers with sources, conversations kept per user, Stop."""

from __future__ import annotations

import gradio as gr

from appliance.engine.errors import EngineError, EngineOverloaded, EngineStopped
from appliance.server.services import Services
from knowledge.answer import grounding
from ui.i18n import say, t
from ui.render import render_sources
from ui.session import SessionGuard


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def _hint(request: gr.Request | None = None) -> str:
    return f"<p>{say(request, 'sources_hint')}</p>"


def build_chat_tab(svc: Services, guard: SessionGuard) -> gr.Radio:
    """The Chat tab (returns the conversation list, filled on page load by `conversations_on_load`).
    Each question reaches the engine at once, so browser users are batched."""
    conv_id = gr.State(None)
    with gr.Tab(t("tab_chat")), gr.Row():
        with gr.Column(scale=1, min_width=200):
            new_btn = gr.Button(t("new_chat"), elem_id="new-chat")
            convs = gr.Radio(label=t("conversations"), choices=[], elem_id="conversations")
            del_btn = gr.Button(t("delete_chat"), variant="stop", size="sm")
        with gr.Column(scale=3):
            chat = gr.Chatbot(label=t("answer"), height=460, elem_id="chatbot")
            with gr.Row():
                box = gr.Textbox(placeholder=t("question_placeholder"), show_label=False, scale=5,
                                 elem_id="question")
                send = gr.Button(t("ask"), variant="primary", scale=1, elem_id="ask")
                stop = gr.Button(t("stop"), variant="secondary", scale=0, elem_id="stop")
        with gr.Column(scale=2, min_width=260):
            sources = gr.HTML(_hint(), label=t("sources"), elem_id="sources")

    def ask(question: str, history: list, cid: str | None, request: gr.Request):
        account = guard.user(request)
        user = account.name
        question = (question or "").strip()
        if not question:
            yield history, gr.update(), cid, gr.update(), ""
            return
        messages = [{"role": m["role"], "content": _text(m["content"])} for m in history]
        messages.append({"role": "user", "content": question})
        prepared = svc.chat.prepare(messages, scope=svc.access.scope_for(account))  # fresh per question
        html = render_sources(prepared.citations, prepared.covered, request)
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
            raise gr.Error(say(request, "busy", seconds=int(e.retry_after + 0.999)),
                           title=say(request, "busy_title")) from None
        except (EngineError, EngineStopped) as e:  # the engine, or a remote cluster, failed this answer
            raise gr.Error(say(request, "engine_failed", error=str(e)), title=say(request, "busy_title")) from None
        html = render_sources(prepared.citations, prepared.covered, request, grounding.cited_numbers(answer))
        answer = _grounded(svc, prepared, answer, request)
        cid = svc.history.save(user, cid, [*messages, {"role": "assistant", "content": answer,
                                                       "citations": prepared.citations}])
        yield [*messages, {"role": "assistant", "content": answer}], html, cid, _choices(svc, user, cid), ""

    # Every browser user's question reaches the engine at once: it batches them, and its admission
    # (running + max_queue) refuses the rest with a retry time. Gradio's default would serve one
    # event at a time, and a Gradio-side cap would answer "queue full" without saying when to retry.
    asks = [trigger(ask, [box, chat, conv_id], [chat, sources, conv_id, convs, box], concurrency_limit=None)
            for trigger in (send.click, box.submit)]
    stop.click(None, None, None, cancels=asks)

    def load_conv(choice: str | None, request: gr.Request):
        user = guard.user(request).name
        if not choice:
            return [], _hint(request), None
        msgs = svc.history.get(user, choice)
        last = next((m for m in reversed(msgs) if m.get("citations")), {})
        cited = grounding.cited_numbers(last.get("content", ""))
        return ([{"role": m["role"], "content": m["content"]} for m in msgs],
                render_sources(last.get("citations", []), True, request, cited), choice)

    def new_chat(request: gr.Request):
        guard.user(request)
        return [], _hint(request), None, gr.update(value=None)

    def delete(cid: str | None, request: gr.Request):
        user = guard.user(request).name
        if cid:
            svc.history.delete(user, cid)
        return [], _hint(request), None, _choices(svc, user, None)

    convs.input(load_conv, [convs], [chat, sources, conv_id])
    new_btn.click(new_chat, None, [chat, sources, conv_id, convs])
    del_btn.click(delete, [conv_id], [chat, sources, conv_id, convs])
    return convs


def _grounded(svc: Services, prepared, answer: str, request: gr.Request) -> str:
    """The answer with ⚠ after each sentence the excerpts do not support, and a note saying so."""
    checked = svc.chat.ground(prepared, answer)
    if not any(c.supported is False for c in checked):
        return answer
    return grounding.mark(answer, checked) + "\n\n" + say(request, "unsupported_note")


def conversations_on_load(svc: Services, guard: SessionGuard):
    """The page-load handler filling the conversation list."""

    def on_load(request: gr.Request):
        return _choices(svc, guard.user(request).name, None)

    return on_load


def _choices(svc: Services, user: str, selected: str | None):
    choices = [(title, cid) for cid, title in svc.history.list(user)]
    return gr.update(choices=choices, value=selected)
