"""The suite registers tests/ssl_reuse.py (tests/conftest.py ``pytest_plugins``), in a serial run and in every
pytest-xdist worker: HTTP clients built with the default ``verify`` share one TLS context instead of loading the CA
bundle apiece."""

from __future__ import annotations


def test_two_default_httpx_clients_share_one_tls_context():
    import httpx

    with httpx.Client() as first, httpx.Client() as second:
        assert first._transport._pool._ssl_context is second._transport._pool._ssl_context


def test_httpcore2_hands_out_one_default_tls_context():
    import httpcore2

    assert httpcore2.default_ssl_context() is httpcore2.default_ssl_context()


def test_a_client_with_its_own_verify_context_keeps_it():
    import ssl

    import httpx

    own = ssl.create_default_context()
    with httpx.Client(verify=own) as client, httpx.Client() as default:
        assert client._transport._pool._ssl_context is own
        assert default._transport._pool._ssl_context is not own
