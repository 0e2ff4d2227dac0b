"""Who is asking: every UI event re-checks the account, and changed accounts lose their sessions.

Gradio keeps logged-in sessions as tokens in its app (`tokens`: token → user name). An account that
was removed, or whose password or role changed, must not keep working in an open tab: the next
event of any of its sessions is refused and those tokens are dropped.
"""

from __future__ import annotations

import asyncio
import threading

import gradio as gr

from appliance.server.auth import User, UserStore
from ui.i18n import say


class SessionGuard:
    """Current user of a Gradio event, checked against the user store on every call."""

    def __init__(self, users: UserStore) -> None:
        self.users = users
        self.tokens: dict[str, str] | None = None  # Gradio's session table, set once mounted
        self._stamps: dict[str, str] = {}
        self._lock = threading.Lock()

    async def login(self, username: str, password: str) -> bool:
        """Gradio's auth callback. scrypt takes ~50 ms of CPU: run it off the event loop."""
        try:
            user = await asyncio.to_thread(self.users.login, username, password)
        except Exception:  # noqa: BLE001 - a wrong password and a lockout both mean "no"
            return False
        with self._lock:
            self._stamps[user.name] = user.stamp
        return True

    def user(self, request: gr.Request) -> User:
        """The account behind this event; raises gr.Error (and ends its sessions) when it changed."""
        name = request.username or ""
        user = self.users.get(name)
        with self._lock:
            seen = self._stamps.setdefault(name, user.stamp) if user else None
        if user is None or seen != user.stamp:
            self.end_sessions(name)
            raise gr.Error(say(request, "session_ended"))
        return user

    def is_admin(self, request: gr.Request) -> bool:
        return self.user(request).is_admin

    def accept(self, user: User) -> None:
        """The account changed legitimately (own password change): remember its new stamp."""
        with self._lock:
            self._stamps[user.name] = user.stamp

    def end_sessions(self, name: str, keep: str | None = None) -> int:
        """Drop every Gradio session token of `name` except `keep`; returns how many."""
        with self._lock:
            self._stamps.pop(name, None)
            if self.tokens is None:
                return 0
            doomed = [tok for tok, user in list(self.tokens.items()) if user == name and tok != keep]
            for tok in doomed:
                self.tokens.pop(tok, None)
        return len(doomed)
