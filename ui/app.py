"""The Gradio UI, mounted into the FastAPI app. It calls the same services as the API.

Air-gap rules: system fonts only (no web fonts), analytics off, no SSR node server.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from fastapi import FastAPI  # noqa: E402

from appliance.server.services import Services  # noqa: E402
from ui.account import build_account_tab  # noqa: E402
from ui.admin import build_admin_tab  # noqa: E402
from ui.chat import build_chat_tab, conversations_on_load  # noqa: E402
from ui.documents import build_documents_tab  # noqa: E402
from ui.files import add_document_route  # noqa: E402
from ui.i18n import EN, I18N, t  # noqa: E402
from ui.session import SessionGuard  # noqa: E402

THEME = gr.themes.Base(font=["system-ui", "-apple-system", "Segoe UI", "sans-serif"],
                       font_mono=["ui-monospace", "Menlo", "Consolas", "monospace"])


def build_ui(svc: Services, guard: SessionGuard) -> gr.Blocks:
    """The Blocks app: chat with sources and history, documents, account, admin."""
    with gr.Blocks(title=EN["title"], analytics_enabled=False) as demo:
        with gr.Row():
            gr.Markdown(t("title"), elem_id="app-title")
            gr.Button(t("logout"), link="/logout", size="sm", scale=0, elem_id="logout")
        convs = build_chat_tab(svc, guard)
        demo.load(conversations_on_load(svc, guard), None, [convs])
        build_documents_tab(svc, guard)
        build_account_tab(svc, guard)
        build_admin_tab(svc, guard)
    return demo


def mount_ui(app: FastAPI, svc: Services) -> None:
    """Mount the UI at / with login through the appliance's user store."""
    guard = SessionGuard(svc.users)
    add_document_route(app, svc, guard)
    demo = build_ui(svc, guard)
    # The queue holds what the engine can run plus what it would queue; beyond that Gradio refuses.
    demo.queue(max_size=svc.settings.engine.n_seq_max + svc.settings.engine.max_queue)
    max_bytes = int(svc.settings.knowledge.max_file_mb * 2**20)  # refused before anything is written
    gr.mount_gradio_app(app, demo, path="", max_file_size=max_bytes, auth=guard.login, ssr_mode=False,
                        theme=THEME, i18n=I18N, footer_links=["settings"], auth_message=EN["auth_message"])
    # Gradio's session table, so that removed or changed accounts lose their open sessions.
    guard.tokens = next(r.app.tokens for r in app.routes if hasattr(getattr(r, "app", None), "tokens"))
