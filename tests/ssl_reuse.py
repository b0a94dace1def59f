"""A pytest plugin (``-p tests.ssl_reuse``): every HTTP client a test builds shares one default TLS context.

Each ``ChatOpenAI`` builds a sync and an async httpx2 client, each ``httpx.Client`` (tools/client.py,
training/http_reward.py) one, and each of those a default SSL context that loads a CA bundle
(``load_verify_locations``, 30-40 ms of CPU apiece): about two thirds of the CPU of a backbone test against a local
stub, which speaks plain HTTP and never uses the context. The plugin keeps the first default context made for each
trust setting (``trust_env`` and, where trusted, ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as read at the call) and
hands it out again; a client with ``verify=True`` and no ``cert`` does not change the context it is given (only an
HTTPS connection sets its ALPN protocols, the same for every client). Clients built with their own ``verify``
context or a ``cert`` get what they got before."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any


def shared_default_ssl_context(real: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    """``real`` (httpcore2's ``default_ssl_context``), built once per trust setting."""
    made: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def default_ssl_context(*, _trust_env: bool = True) -> ssl.SSLContext:
        key = _trust_key(_trust_env)
        if key not in made:
            made[key] = real(_trust_env=_trust_env)
        return made[key]

    return default_ssl_context


def _trust_key(trust_env: bool) -> tuple[bool, str | None, str | None]:
    return (True, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else (False, None, None)


def shared_create_ssl_context(real: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    """``real`` (httpx's ``create_ssl_context``), built once per trust setting for ``verify=True`` without a
    ``cert``; any other arguments go to ``real`` as they are."""
    made: dict[tuple[bool, str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert:
            return real(verify=verify, cert=cert, trust_env=trust_env)
        key = _trust_key(trust_env)
        if key not in made:
            made[key] = real(verify=verify, cert=cert, trust_env=trust_env)
        return made[key]

    return create_ssl_context


def pytest_configure(config: Any) -> None:
    import httpcore2
    import httpx._transports.default as httpx_transports

    httpcore2.default_ssl_context = shared_default_ssl_context(httpcore2.default_ssl_context)
    httpx_transports.create_ssl_context = shared_create_ssl_context(httpx_transports.create_ssl_context)
