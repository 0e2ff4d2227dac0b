"""The composition root: the one place that knows every layer and wires them together.

`appliance.server` builds the API and never imports `ui`; `ui` calls the server's services.
Only this module sees both, so the dependency arrows stay one-way (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from appliance.config import Settings
    from appliance.server.services import Services


def build_app(settings: Settings, svc: Services, ui: bool = True) -> FastAPI:
    """The one-port app: API, /metrics, /healthz, and the Gradio UI at / unless `ui` is off."""
    from appliance.server.app import create_app

    app = create_app(settings, svc)
    if ui:
        from ui.app import mount_ui

        mount_ui(app, svc)
    else:
        from fastapi.responses import RedirectResponse

        app.add_api_route("/", lambda: RedirectResponse("/healthz"), include_in_schema=False)
    return app
