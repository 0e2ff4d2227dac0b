"""FastAPI dependencies: the services, and the caller authenticated by API key."""

from __future__ import annotations

import hmac

from fastapi import Depends, Request, Security
from fastapi.security import HTTPBearer

from appliance.server.auth import User
from appliance.server.services import Services
from appliance.server.wire import ApiError

# Who the command line acts as when it hands a write to the running server.
LOCAL_USER = User("appliance-cli", "admin")
# Declares `Authorization: Bearer <api key>` in the OpenAPI schema (what clients and schemathesis read);
# the header is checked below, so a missing one is our 401 in OpenAI's error format, not FastAPI's.
BEARER = HTTPBearer(auto_error=False, scheme_name="apiKey", description="An API key (`appliance users key create`).")


def services(request: Request) -> Services:
    return request.app.state.services


def current_user(request: Request, svc: Services = Depends(services), _declared=Security(BEARER)) -> User:
    """`Authorization: Bearer <api key>`; every API route needs it."""
    key = _bearer(request)
    if _is_local(key, svc):
        request.state.user = LOCAL_USER.name
        return LOCAL_USER
    user = svc.users.user_for_key(key) if key else None
    if user is None:
        raise ApiError(401, "invalid or missing API key", "invalid_api_key", "authentication_error")
    request.state.user = user.name
    return user


def local_admin(request: Request, svc: Services = Depends(services), _declared=Security(BEARER)) -> User:
    """Only the command line on this machine (the token in the data directory's server.json)."""
    key = _bearer(request)
    if not key or (not _is_local(key, svc) and svc.users.user_for_key(key) is None):
        raise ApiError(401, "invalid or missing API key", "invalid_api_key", "authentication_error")
    if not _is_local(key, svc):
        raise ApiError(403, "this route is for the appliance command line on the server's machine", "forbidden",
                       "permission_error")
    request.state.user = LOCAL_USER.name
    return LOCAL_USER


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else ""


def _is_local(key: str, svc: Services) -> bool:
    return bool(key and svc.local_token and hmac.compare_digest(key.encode(), svc.local_token.encode()))


def admin_user(user: User = Depends(current_user)) -> User:
    if not user.is_admin:
        raise ApiError(403, "this route is for administrators", "forbidden", "permission_error")
    return user
