"""The documents tab: upload, list, remove, re-index, all through the documents service."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from appliance.server.services import Services
from knowledge.errors import KnowledgeError
from knowledge.index.access import DEFAULT_COLLECTION
from ui.document_qa import build_document_qa
from ui.i18n import say, t
from ui.render import render_report
from ui.session import SessionGuard

UPLOAD_TYPES = [".pdf", ".docx", ".pptx", ".xlsx", ".html", ".htm", ".md", ".txt"]


def build_documents_tab(svc: Services, guard: SessionGuard) -> None:
    docs_svc = svc.documents
    with gr.Tab(t("tab_documents")):
        files = gr.File(label=t("upload"), file_count="multiple", file_types=UPLOAD_TYPES, elem_id="upload")
        with gr.Row():
            collection = gr.Dropdown([DEFAULT_COLLECTION], value=DEFAULT_COLLECTION, allow_custom_value=True,
                                     label=t("upload_collection"), scale=1, elem_id="upload-collection")
            go = gr.Button(t("upload_go"), variant="primary", scale=3, elem_id="upload-go")
        summary = gr.Markdown(elem_id="documents-summary")
        docs = gr.Dataframe(headers=["source", "collection", "status", "chunks", "error", "root"], interactive=False,
                            label=t("indexed"), elem_id="documents")
        with gr.Row():
            target = gr.Textbox(label=t("remove_source"), scale=3, elem_id="remove-source")
            remove = gr.Button(t("remove"), variant="stop", scale=1, elem_id="remove")
            reindex = gr.Button(t("reindex"), scale=1, elem_id="reindex")
        build_document_qa(svc, guard, docs)

    def upload(paths: list[str] | None, where: str | None, request: gr.Request, progress=gr.Progress()):
        user = guard.user(request)
        if svc.settings.upload_requires_admin and not user.is_admin:
            return say(request, "upload_admins_only")
        if not paths:
            return say(request, "choose_files")
        where = (where or DEFAULT_COLLECTION).strip()
        if where not in svc.access.writable(user):
            return say(request, "upload_not_allowed", collection=where)
        progress(0.1, desc=say(request, "indexing"))
        try:
            return render_report(docs_svc.upload(((Path(p).name, Path(p)) for p in paths), None, where))
        except KnowledgeError as e:  # a full disk: say so, the index stays as it was
            return str(e)
        finally:
            for p in paths:  # Gradio's temporary copies: the uploads folder holds the kept one
                Path(p).unlink(missing_ok=True)

    def listing(request: gr.Request):
        scope = svc.access.scope_for(guard.user(request))
        return [[r.source, r.collection, r.status, len(r.chunk_ids), r.error or "", r.root]
                for r in docs_svc.list(scope)]

    def writable(request: gr.Request):
        choices = svc.access.writable(guard.user(request)) or [DEFAULT_COLLECTION]
        return gr.update(choices=choices, value=choices[0] if DEFAULT_COLLECTION not in choices else DEFAULT_COLLECTION)

    def on_remove(source: str, request: gr.Request):
        if not guard.is_admin(request):
            return say(request, "admins_only"), listing(request)
        try:
            message = say(request, "removed", n=len(docs_svc.remove(source)))
        except KnowledgeError as e:
            message = str(e)
        return message, listing(request)

    def on_reindex(request: gr.Request):
        if not guard.is_admin(request):
            return say(request, "admins_only"), listing(request)
        try:
            return "\n\n".join(render_report(r) for r in docs_svc.reindex()), listing(request)
        except KnowledgeError as e:
            return str(e), listing(request)

    go.click(upload, [files, collection], [summary])
    collection.focus(writable, None, [collection])
    remove.click(on_remove, [target], [summary, docs])
    reindex.click(on_reindex, None, [summary, docs])
    gr.Timer(15.0).tick(listing, None, [docs])
