"""The OpenAPI schema as the server really answers, and 405 for methods a route does not take.

FastAPI documents only 200 and its own 422; this API answers errors in OpenAI's format with 400
for an invalid request (clients written for OpenAI expect that), 401 without a key, 403, 404, 413,
503 with Retry-After when busy and 507 when the disk is full. The schema says so, so that a
client generator or an API tester (schemathesis, in the suite) checks the real contract.
"""

from __future__ import annotations

import functools
import re

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.routing import Match, Mount

ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["message", "type", "code"], "properties": {
        "message": {"type": "string"}, "type": {"type": "string"}, "param": {"type": ["string", "null"]},
        "code": {"type": ["string", "null"]}}}},
}
ERRORS = {"400": "Invalid request", "401": "Missing or invalid API key", "403": "Not allowed for this key",
          "404": "No such model, document or route", "413": "Upload over the size limit",
          "503": "Busy (see Retry-After) or the engine stopped", "507": "The disk is full"}
_UNAUTHENTICATED = {"/healthz"}


def api_schema(app: FastAPI) -> dict:
    """The app's OpenAPI document with the error responses every route can give, and the model names
    it serves (`app.state.models`, as /v1/models lists them); cached on the app."""
    if app.openapi_schema:
        return app.openapi_schema
    models = getattr(app.state, "models", None)
    schema = get_openapi(title="appliance", version="1", routes=app.routes,
                         description="OpenAI-compatible chat over the knowledge base, and its documents.")
    components = schema.get("components", {}).get("schemas", {})
    for name, extra in (("ChatRequest", []), ("TokenizeRequest", [""])):
        if models and name in components:
            components[name]["properties"]["model"]["enum"] = [*extra, *models]
    if models and "ChatRequest" in components:  # the whole-document model needs the document it reads
        components["ChatRequest"]["if"] = {"properties": {"model": {"const": models[1]}}, "required": ["model"]}
        components["ChatRequest"]["then"] = {"required": ["document"],
                                             "properties": {"document": {"type": "string", "minLength": 1}}}
    error = {"content": {"application/json": {"schema": ERROR_SCHEMA}}}
    for path, operations in schema.get("paths", {}).items():
        for op in operations.values():
            responses = op.setdefault("responses", {})
            responses.pop("422", None)  # validation errors are 400 here, as in OpenAI's API
            codes = {"503"} if path in _UNAUTHENTICATED else set(ERRORS)
            for code in sorted(codes):
                responses.setdefault(code, {"description": ERRORS[code], **error})
    app.openapi_schema = schema
    return schema


def add_method_not_allowed(app: FastAPI) -> None:
    """A known API path asked with a method it does not take answers 405 with `Allow`, and an unknown
    path under /v1/ a 404 in the API's error format (the UI, mounted at '/', would otherwise answer
    either one with its own 404)."""

    @app.middleware("http")
    async def method_not_allowed(request: Request, call_next):
        allowed = _allowed_methods(app, request.scope)
        if allowed and request.method not in allowed:
            return _error(405, f"{request.method} is not allowed here", "method_not_allowed",
                          {"Allow": ", ".join(sorted(allowed))})
        if request.url.path.startswith("/v1/") and not _routed(app, request.scope):
            return _error(404, f"no API route {request.url.path!r}", "not_found")
        return await call_next(request)


def _routed(app: FastAPI, scope: dict) -> bool:
    """Whether one of the API's own routes (not the UI mounted at '/') takes this request."""
    return any(route.matches(scope)[0] == Match.FULL for route in app.routes if not isinstance(route, Mount))


def _error(status: int, message: str, code: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                   "code": code}}, status_code=status, headers=headers)


def _allowed_methods(app: FastAPI, scope: dict) -> set[str]:
    """The methods the documented API takes at this path (empty: not an API path; the UI's then).
    A fixed path wins over a templated one (`/v1/documents/reindex` is not a document's source)."""
    path = scope.get("path", "")
    fixed, templated = set(), set()
    for template, methods in api_schema(app).get("paths", {}).items():
        if template == path:
            fixed |= {m.upper() for m in methods}
        elif "{" in template and _template_regex(template).fullmatch(path):
            templated |= {m.upper() for m in methods}
    allowed = fixed or templated
    return allowed | ({"HEAD"} if "GET" in allowed else set())


@functools.lru_cache(maxsize=64)
def _template_regex(template: str) -> re.Pattern:
    return re.compile(re.sub(r"\\\{[^}]+\\\}", ".+", re.escape(template)), re.DOTALL)
