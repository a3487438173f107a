"""Who may use the studio, and protection against cross-site requests.

The model (docs/studio.md, "Security"):

* **Bind address.** Without a token the studio only listens on a loopback address;
  any other address needs a token (:func:`check_bind`).
* **Token.** When one is set, every API request carries it as
  ``Authorization: Bearer TOKEN`` (compared in constant time). The page itself and its
  static files hold no data and need none.
* **Host header.** On a loopback bind, a request must name a loopback host: a web
  page whose domain an attacker re-points at 127.0.0.1 (DNS rebinding) sends its own
  domain as the Host and is refused.
* **Cross-site requests.** Every POST must carry the header ``X-Apportion-Studio: 1``
  and a JSON content type: a browser lets another site's page send neither without a
  CORS preflight, which the studio never answers, so an HTML form or a ``no-cors``
  fetch from elsewhere is refused before it does anything. ``Origin`` and
  ``Sec-Fetch-Site``, when the browser sends them, must say same-origin as well:
  ``Origin`` must name the Host the request was sent to or, behind a reverse proxy
  that does not pass the browser's Host on, the studio's public origin
  (``--public-origin``, :func:`check_origin`).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
CSRF_HEADER = "x-apportion-studio"
MIN_TOKEN_LENGTH = 16


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Raise ValueError when serving on ``host`` with ``token`` would be unsafe."""
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise ValueError(f"the studio token must be at least {MIN_TOKEN_LENGTH} characters")
    if token is None and not is_loopback(host):
        raise ValueError(
            f"refusing to serve the studio on {host} without a token: only 127.0.0.1, "
            "localhost and ::1 may be bound without one (--token or APPORTION_STUDIO_TOKEN)"
        )


def check_origin(url: str) -> str:
    """``url`` as an origin (``scheme://host[:port]``); ValueError when it is not one."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(
            f"the studio's public origin {url!r} must be scheme://host[:port], "
            "e.g. https://studio.example.com"
        )
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"the studio's public origin {url!r} has more than scheme://host[:port]")
    return f"{parts.scheme}://{parts.netloc}".lower()


def _host_name(header: str) -> str:
    """The host of a Host header (``[::1]:8765`` -> ``::1``, ``a:80`` -> ``a``)."""
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "details": []}}, status)


@dataclass(frozen=True)
class Guard:
    token: str | None
    # Only loopback Host headers are accepted (a loopback bind).
    loopback_only: bool
    # The origin the browser sees behind a reverse proxy (check_origin's form).
    public_origin: str | None = None

    def check(self, request: Request) -> JSONResponse | None:
        """None when ``request`` may proceed; else the response refusing it."""
        host = request.headers.get("host", "")
        if self.loopback_only and not (is_loopback(_host_name(host)) or self._public_host(host)):
            return _error(421, "bad_host", "this studio answers only to a loopback host name")
        if self.token is not None:
            given = request.headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), self.token.encode()
            ):
                return _error(401, "token_required", "this studio needs its token")
        if request.method not in ("GET", "HEAD"):
            return self._same_origin(request, host)
        return None

    def _same_origin(self, request: Request, host: str) -> JSONResponse | None:
        if request.headers.get(CSRF_HEADER) != "1":
            return _error(
                403,
                "cross_site",
                f"a change needs the {CSRF_HEADER} header (the studio page sends it)",
            )
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _error(415, "cross_site", "a change is sent as application/json")
        origin = request.headers.get("origin")
        if origin is not None and not self._known_origin(origin, host):
            return _error(403, "cross_site", f"requests from {origin} are refused")
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return _error(403, "cross_site", f"a {site} request is refused")
        return None

    def _public_host(self, host: str) -> bool:
        # A proxy passing the browser's Host on names the public origin's host.
        return (
            self.public_origin is not None and host.lower() == urlsplit(self.public_origin).netloc
        )

    def _known_origin(self, origin: str, host: str) -> bool:
        if origin == "null":
            return False
        if self.public_origin is not None and origin.lower() == self.public_origin:
            return True
        return urlsplit(origin).netloc == host
