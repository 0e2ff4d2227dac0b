"""FastAPI dependencies: the services, and the caller authenticated by API key."""

from __future__ import annotations

from fastapi import Depends, Request

from appliance.server.auth import User
from appliance.server.services import Services
from appliance.server.wire import ApiError


def services(request: Request) -> Services:
    return request.app.state.services


def current_user(request: Request, svc: Services = Depends(services)) -> User:
    """`Authorization: Bearer <api key>`; every API route needs it."""
    header = request.headers.get("authorization", "")
    key = header[7:].strip() if header.lower().startswith("bearer ") else ""
    user = svc.users.user_for_key(key) if key else None
    if user is None:
        raise ApiError(401, "invalid or missing API key", "invalid_api_key", "authentication_error")
    request.state.user = user.name
    return user


def admin_user(user: User = Depends(current_user)) -> User:
    if not user.is_admin:
        raise ApiError(403, "this route is for administrators", "forbidden", "permission_error")
    return user
