"""The account tab: a user changes their own password; their other sessions end."""

from __future__ import annotations

import gradio as gr

from appliance.server.auth import AuthError
from appliance.server.services import Services
from ui.i18n import say, t
from ui.session import SessionGuard


def build_account_tab(svc: Services, guard: SessionGuard) -> None:
    with gr.Tab(t("tab_account")):
        current = gr.Textbox(label=t("current_password"), type="password", elem_id="pw-current")
        new = gr.Textbox(label=t("password_new"), type="password", elem_id="pw-new")
        again = gr.Textbox(label=t("password_repeat"), type="password", elem_id="pw-again")
        go = gr.Button(t("change_password"), elem_id="pw-change")
        out = gr.Markdown(elem_id="pw-result")

    def change(old: str, new_pw: str, repeat: str, request: gr.Request):
        name = guard.user(request).name
        if new_pw != repeat:
            return say(request, "passwords_differ"), "", "", ""
        try:
            svc.users.login(name, old)
        except AuthError:
            return say(request, "wrong_password"), "", "", ""
        try:
            svc.users.set_password(name, new_pw)
        except AuthError as e:
            return str(e), "", "", ""
        guard.accept(svc.users.get(name))
        guard.end_sessions(name, keep=_token(request))
        return say(request, "password_changed"), "", "", ""

    go.click(change, [current, new, again], [out, current, new, again])


def _token(request: gr.Request) -> str | None:
    cookies = getattr(request, "cookies", None) or {}
    return next((v for k, v in cookies.items() if k.startswith("access-token")), None)
