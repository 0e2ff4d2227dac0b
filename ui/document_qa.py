"""Whole-document answers in the Documents tab: "Summarise" and "Ask about this document" on the
selected document (map-reduce over every section, progress shown, Stop cancels the calls in flight)."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

import gradio as gr

from appliance.engine.errors import EngineError, EngineOverloaded, EngineStopped
from appliance.server.chat import Prepared
from appliance.server.longdoc import DocumentError, find_document
from appliance.server.services import Services
from knowledge.index.access import Scope
from ui.i18n import say, t
from ui.render import render_sources
from ui.session import SessionGuard


def build_document_qa(svc: Services, guard: SessionGuard, docs: gr.Dataframe) -> None:
    """The controls under the documents list; clicking a row of `docs` chooses its document."""
    with gr.Row():
        source = gr.Textbox(label=t("document"), scale=3, elem_id="doc-source")
        question = gr.Textbox(label=t("doc_question"), scale=4, elem_id="doc-question")
    with gr.Row():
        summarise = gr.Button(t("summarise"), variant="primary", elem_id="doc-summarise")
        ask = gr.Button(t("ask_document"), elem_id="doc-ask")
        stop = gr.Button(t("stop"), variant="secondary", elem_id="doc-stop")
    answer = gr.Markdown(elem_id="doc-answer")
    sources = gr.HTML(elem_id="doc-sources")

    def choose(event: gr.SelectData):
        row = event.row_value if isinstance(event.row_value, list) else []
        return row[0] if row else gr.update()

    def run(ref: str, text: str | None, request: gr.Request):
        scope = svc.access.scope_for(guard.user(request))
        try:
            chunks = find_document(svc.kb.db, svc.kb.cfg.name, (ref or "").strip(), files_on_disk=False, scope=scope)
            sections = svc.longdoc.split(chunks)
        except DocumentError as e:
            yield str(e), ""
            return
        stop, updates = threading.Event(), queue.Queue()
        work = _start(svc, sections, text, updates, stop, scope)
        try:
            while not work.done():  # progress while the sections are read
                try:
                    stage, done, total = updates.get(timeout=0.5)
                except queue.Empty:
                    continue
                yield say(request, "doc_progress_" + stage, done=done, total=total), ""
            prepared = work.result()
            html = render_sources(prepared.citations, prepared.covered, request)
            text_so_far = ""
            for delta in svc.chat.stream(prepared, svc.chat.answer_params(guard.user(request).name)):
                text_so_far += delta
                yield text_so_far, html
        except EngineOverloaded as e:
            raise gr.Error(say(request, "busy", seconds=int(e.retry_after + 0.999)),
                           title=say(request, "busy_title")) from None
        except (EngineError, EngineStopped) as e:
            raise gr.Error(say(request, "engine_failed", error=str(e)), title=say(request, "busy_title")) from None
        finally:
            stop.set()  # Stop or a closed tab closes this generator: the map calls in flight end

    def on_summarise(ref: str, request: gr.Request):
        yield from run(ref, None, request)

    def on_ask(ref: str, text: str, request: gr.Request):
        yield from run(ref, (text or "").strip() or None, request)  # no question: a summary

    docs.select(choose, None, [source])
    # Like chat questions, these reach the engine at once (its admission refuses what does not fit).
    runs = [summarise.click(on_summarise, [source], [answer, sources], concurrency_limit=None),
            ask.click(on_ask, [source, question], [answer, sources], concurrency_limit=None)]
    stop.click(None, None, None, cancels=runs)


def _start(svc: Services, sections: list, question: str | None, updates: queue.Queue,
           stop: threading.Event, scope: Scope) -> Future[Prepared]:
    """Map and reduce in a thread; progress (stage, done, total) goes to `updates`."""
    future: Future[Prepared] = Future()

    def work() -> None:
        try:
            future.set_result(svc.longdoc.prepare(sections, question, lambda *p: updates.put(p), stop, scope=scope))
        except BaseException as e:  # noqa: BLE001 - handed to the UI thread, which reports it
            future.set_exception(e)

    threading.Thread(target=work, name="longdoc", daemon=True).start()
    return future
