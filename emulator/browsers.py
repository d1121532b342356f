"""Requests a web browser sends for a page of another site, refused where they would change the
local stack's state (issue 43, item 4).

A page the developer opens can make the browser send a "simple request" to any address (GET,
HEAD, or a POST of a form or text/plain body), with no CORS preflight: CORS keeps the page from
reading the answer, not the request from acting (an S3 form upload, a fault switch, moto's reset).
The browser says where such a request comes from: ``Origin`` (the page's origin, or ``null`` for
a file or a sandboxed frame) on every POST and on every cross-origin request but a plain GET, and
``Sec-Fetch-Site`` (``cross-site``, ``same-site``, ``same-origin``, ``none`` when typed in the
address bar) on all of them. An SDK, the AWS CLI, curl and the harness send neither, so they are
never refused here. A page of the stack's own origin (moto's dashboard at /moto-api/) is not
cross-site. The Host check (server.py) refuses DNS rebinding, where a page of another site is
the same origin as the stack.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

# What a browser may send cross-site without changing the stack: AWS's reads (S3 GetObject, a
# link to an object). Every method but these changes state somewhere.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# moto's API and dashboard (/moto-api/: reset, seed and the recorder on GET too) and the
# emulator's control endpoints: never for another site, whatever the method.
CONTROL_PATHS = ("/moto-api", "/_emulator")
_OTHER_SITES = frozenset({"cross-site", "same-site"})  # same-site: another port or subdomain
_DEFAULT_PORTS = {"http": 80, "https": 443}


def refusal(environ: dict[str, Any]) -> str | None:
    """The one-line reason this request is refused, or None: it comes from a page of another
    site (its ``Sec-Fetch-Site``, or an ``Origin`` not the request's own) and would change state
    (any method but GET, HEAD and OPTIONS; any call to /moto-api or /_emulator)."""
    why = _other_site(environ)
    if why is None:
        return None
    path = environ.get("PATH_INFO", "")
    if environ.get("REQUEST_METHOD") in SAFE_METHODS and not path.startswith(CONTROL_PATHS):
        return None
    return (
        f"cross-site request refused by the local stack: {why}; a web page may not change the "
        "local stack, call it with an AWS SDK, the AWS CLI or curl (no Origin or Sec-Fetch-Site "
        "header)"
    )


def _other_site(environ: dict[str, Any]) -> str | None:
    site = environ.get("HTTP_SEC_FETCH_SITE")
    if site is not None and site.strip().lower() in _OTHER_SITES:
        return f"Sec-Fetch-Site: {site.strip()}"
    origin = environ.get("HTTP_ORIGIN")
    if origin is None:
        return None
    own = own_origin(environ)
    if _origin(origin) != own:
        scheme, name, port = own
        host = f"[{name}]" if ":" in name else name
        return f"Origin {origin!r} is not the stack's own ({scheme}://{host}:{port})"
    return None


def own_origin(environ: dict[str, Any]) -> tuple[str, str, int | None]:
    """The origin the request addresses: its scheme, its Host's name and port (the scheme's
    default without one)."""
    scheme = environ.get("wsgi.url_scheme", "http")
    return _origin(f"{scheme}://{environ.get('HTTP_HOST', '')}") or (scheme, "", None)


def _origin(text: str) -> tuple[str, str, int | None] | None:
    """(scheme, host name, port) of an origin; None for ``null`` or what is no http(s) origin."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:  # a port that is no number, an unclosed [
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or _DEFAULT_PORTS[parts.scheme]
