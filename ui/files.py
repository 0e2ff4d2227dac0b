"""`GET /documents/{source}`: the original file behind a citation, for logged-in users.

Only files the index knows are served, looked up by their source path as cited; the client never
names a path on disk. Browser sessions (Gradio's cookie) and API keys are both accepted.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse

from appliance.server.auth import User
from appliance.server.services import Services
from ui.session import SessionGuard


def add_document_route(app: FastAPI, svc: Services, guard: SessionGuard) -> None:
    """Register the route (before Gradio is mounted at '/', which would catch it otherwise)."""

    @app.get("/documents/{source:path}", include_in_schema=False)
    def document(source: str, request: Request) -> FileResponse:
        user = _caller(request, svc, guard)
        if user is None:
            raise HTTPException(401, "log in first")
        # Only documents of the caller's collections; another collection's file is "not found", not
        # "forbidden", so that a guess does not even learn that it exists.
        scope = svc.access.scope_for(user)
        rec = next((r for r in svc.documents.list(scope) if r.source == source and r.status == "done"), None)
        if rec is None or not Path(rec.path).is_file():
            raise HTTPException(404, "no indexed document with that source")
        media = mimetypes.guess_type(rec.path)[0] or "application/octet-stream"
        # Inline for what browsers show safely; HTML is sent as text so a document cannot run script here.
        if media in ("text/html", "image/svg+xml", "application/xhtml+xml"):
            media = "text/plain; charset=utf-8"
        return FileResponse(rec.path, media_type=media, filename=Path(rec.path).name,
                            content_disposition_type="inline")


def _caller(request: Request, svc: Services, guard: SessionGuard) -> User | None:
    """The account behind an API key or a browser session cookie, None when there is none."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return svc.users.user_for_key(header[7:].strip())
    tokens = guard.tokens or {}
    for name, value in request.cookies.items():
        if name.startswith("access-token") and value in tokens:
            return svc.users.get(tokens[value])
    return None
