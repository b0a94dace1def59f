"""A key in the base URL's query (`?api_key=...`, which some proxies take) stayed in what the project shows:
the connection hint of a failed call and the `scorer.endpoint` every score-batch row records. Both now show a
credential-like parameter's value as a digest (one key still reads as one scorer, two keys as two), and a query
that names no credential as written (Azure's ``api-version`` is part of which server answers)."""

from __future__ import annotations

import pytest

from graph.batch import scorer_of
from graph.cache_keys import endpoint_identity, shown_endpoint
from graph.settings import BackboneSettings


@pytest.mark.parametrize("name", ["api_key", "key", "token", "access_token", "sig", "X-Api-Key", "password"])
def test_a_credential_in_the_query_is_shown_as_a_digest(name: str) -> None:
    shown = shown_endpoint(f"HTTP://Host:80/v1/?{name}=s3cret&api-version=2024-02-01")
    assert "s3cret" not in shown
    assert shown.startswith("http://host/v1?") and "api-version=2024-02-01" in shown
    assert shown == shown_endpoint(f"http://host/v1?{name}=s3cret&api-version=2024-02-01")
    assert shown != shown_endpoint(f"http://host/v1?{name}=other&api-version=2024-02-01")


def test_a_query_without_credentials_is_shown_as_the_identity() -> None:
    url = "https://example.com/openai/v1?api-version=2024-02-01"
    assert shown_endpoint(url) == endpoint_identity(url)


def test_a_batch_row_never_records_the_key() -> None:
    settings = BackboneSettings(base_url="http://127.0.0.1:8000/v1?api_key=s3cret", model="m")
    endpoint = scorer_of(settings)["endpoint"]
    assert "s3cret" not in endpoint and endpoint.startswith("http://127.0.0.1:8000/v1?api_key=sha256:")


@pytest.mark.parametrize("query", ["deployment=my%20model", "x=a/b", "flag", "a=1&b", "route=a%2Bb&api-version=1"])
def test_a_query_without_credentials_is_kept_as_written(query: str) -> None:
    """Re-encoded (`my%20model` as `my+model`, `a/b` as `a%2Fb`, a bare `flag` as `flag=`), the row's
    scorer.endpoint differed from the one every row written before shown_endpoint recorded (endpoint_identity):
    a resume into such an output was refused as another scorer's."""
    url = f"http://host:8000/v1?{query}"
    assert shown_endpoint(url) == endpoint_identity(url)


def test_only_the_credential_value_changes() -> None:
    shown = shown_endpoint("http://host/v1?deployment=my%20model&api_key=s3cret&x=a/b")
    assert shown.startswith("http://host/v1?deployment=my%20model&api_key=sha256:") and shown.endswith("&x=a/b")
    assert shown_endpoint(shown) == shown  # a shown endpoint is shown as it is (a row's record read back)


def test_a_row_that_recorded_the_key_is_the_same_scorer() -> None:
    """Rows written before shown_endpoint recorded the key itself (endpoint_identity): read as another scorer's,
    a resume into their output was refused and `raa eval compare` called the two sides' scorers different."""
    from graph.batch import same_scorer

    url = "http://127.0.0.1:8000/v1?api_key=s3cret"
    ours = scorer_of(BackboneSettings(base_url=url, model="m"))
    old = {**ours, "endpoint": endpoint_identity(url)}
    assert same_scorer(old, ours) and same_scorer(ours, old)
    assert not same_scorer({**old, "endpoint": endpoint_identity(url.replace("s3cret", "other"))}, ours)
