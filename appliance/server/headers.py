"""Browser hardening on every response: CSP, no framing, no sniffing, no referrer, and Secure cookies
behind an HTTPS reverse proxy.

The policy is what the Gradio page needs and no more, measured in Chromium (tests/test_browser_security.py
counts the CSP violations of a session through every tab: there must be none). Gradio writes its
configuration into an inline script and styles elements inline, hence 'unsafe-inline' for both, and
its HTML component (our Sources panel) renders its template with `new Function`, hence 'unsafe-eval'
(measured: without it the panel shows "Evaluating a string as JavaScript violates the following
Content Security Policy directive"). Scripts still come only from this origin. Nothing may frame
the app (`frame-ancestors 'none'`, and X-Frame-Options for older browsers): the chat cannot be
clickjacked.
"""

from __future__ import annotations

from fastapi import FastAPI, Request

PAGE_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; font-src 'self' data:; media-src 'self' blob:; connect-src 'self'; "
            "worker-src 'self' blob:; object-src 'none'; base-uri 'self'; form-action 'self'; "
            "frame-ancestors 'none'")
# An original document behind a citation: shown, never run (HTML is already sent as text/plain); a PDF
# needs the browser's own viewer, hence object-src.
DOCUMENT_CSP = "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; object-src 'self'; " \
               "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
COMMON = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
}
HSTS = "max-age=31536000"


def add_security_headers(app: FastAPI, https_proxy: bool) -> None:
    """Set the headers on every response (API, UI, documents). With `https_proxy` (TLS ends at a reverse
    proxy in front), cookies are Secure and SameSite=Lax, and browsers are told to stay on HTTPS."""

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        response = await call_next(request)
        for name, value in COMMON.items():
            response.headers.setdefault(name, value)
        is_document = request.url.path.startswith("/documents/")
        response.headers["Content-Security-Policy"] = DOCUMENT_CSP if is_document else PAGE_CSP
        if https_proxy:
            response.headers["Strict-Transport-Security"] = HSTS
            raw = response.headers.raw  # the response's own header list: rewritten in place
            raw[:] = [(k, secure_cookie(v) if k.lower() == b"set-cookie" else v) for k, v in raw]
        return response


def secure_cookie(header: bytes) -> bytes:
    """A Set-Cookie value with `Secure`, and `SameSite=Lax` in place of `None` (nothing frames the app,
    so no cookie has to travel in a third-party context)."""
    parts = [p.strip() for p in header.decode("latin-1").split(";")]
    attrs = {p.split("=", 1)[0].lower() for p in parts[1:]}
    parts = [("SameSite=Lax" if p.lower() == "samesite=none" else p) for p in parts]
    if "secure" not in attrs:
        parts.append("Secure")
    if "samesite" not in attrs:
        parts.append("SameSite=Lax")
    return "; ".join(parts).encode("latin-1")
