"""The API app factory: FastAPI with the OpenAI routers, /metrics, /healthz and admin routes."""

from __future__ import annotations

import json
import logging
import time
import uuid

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from appliance.config import Settings
from appliance.server import documents_api, openai_api, prometheus, wire
from appliance.server.auth import CLIENT_ADDRESS, User
from appliance.server.deps import admin_user, current_user, services
from appliance.server.headers import add_security_headers
from appliance.server.openapi_doc import add_method_not_allowed, api_schema
from appliance.server.services import Services

access_log = logging.getLogger("appliance.access")


def create_app(settings: Settings, svc: Services) -> FastAPI:
    """Build the API app. The UI is mounted by the composition root (`appliance.compose`)
    and calls the same `svc`."""
    app = FastAPI(title="appliance", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.services = svc
    app.state.models = openai_api.model_names(svc)  # named in the OpenAPI schema
    app.include_router(openai_api.router)
    app.include_router(openai_api.root_router)
    app.include_router(documents_api.router)
    _add_error_handlers(app)
    add_method_not_allowed(app)
    add_security_headers(app, settings.server.https_proxy)
    _add_access_log(app)

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        snap = svc.engine.snapshot()
        reasons = [] if snap["healthy"] else [snap.get("problem") or "engine thread stopped"]
        if svc.kb.store.count() == 0:
            reasons.append("knowledge base is empty")
        status = "ok" if snap["healthy"] else "degraded"
        return JSONResponse({"status": status, "reasons": reasons, "model": svc.engine.model_name,
                             "running": snap["running"], "waiting": snap["waiting"]},
                            status_code=200 if status == "ok" else 503)

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics(user: User = Depends(current_user)) -> Response:
        return Response(prometheus.render(svc), media_type="text/plain; version=0.0.4")

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(user: User = Depends(current_user)) -> JSONResponse:
        """The API's OpenAPI schema, for clients and API testers (for any user with a key; the
        interactive docs stay off)."""
        return JSONResponse(api_schema(app))

    @app.get("/admin/stats")
    def admin_stats(user: User = Depends(admin_user), s: Services = Depends(services)) -> dict:
        return {"engine": s.engine.snapshot(), "users": len(s.users.list()),
                "chunks": s.kb.db.chunk_count(s.kb.cfg.name)}
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(wire.ApiError)
    async def api_error(request: Request, exc: wire.ApiError) -> JSONResponse:
        return JSONResponse(wire.error_body(exc.message, exc.code, exc.type), status_code=exc.status,
                            headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # FastAPI's own errors (a body that is not JSON, say) in the same format as every other one.
        return JSONResponse(wire.error_body(str(exc.detail), "invalid_request" if exc.status_code == 400 else
                                            "http_error", "invalid_request_error"), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse(wire.error_body(f"{where}: {first.get('msg', 'invalid request')}", "invalid_request",
                                            "invalid_request_error"), status_code=400)


def _add_access_log(app: FastAPI) -> None:
    @app.middleware("http")
    async def log_requests(request: Request, call_next):
        rid, t0 = uuid.uuid4().hex[:12], time.perf_counter()
        CLIENT_ADDRESS.set(request.client.host if request.client else "")  # login throttling per address
        response = await call_next(request)
        # One structured line per request: ids, timing, never bodies (no document text, no passwords).
        access_log.info(json.dumps({"id": rid, "method": request.method, "path": request.url.path,
                                    "status": response.status_code, "user": getattr(request.state, "user", None),
                                    "ms": round((time.perf_counter() - t0) * 1000, 1)}))
        response.headers["X-Request-Id"] = rid
        return response
