"""The errors a caller of the public API catches are importable from `graph` itself, as the API is: a resume by an
agent of another config (`ResumeMismatchError`), a new input on a used thread (`ThreadInUseError`), a run id in
flight elsewhere (`RunIdClaimed`) or unclaimable (`RunClaimFailed`), a trace database that cannot be used
(`StoreError`), a fork that writes the frozen contract again (`ContractFrozenError`) and missing endpoint settings
(`SettingsError`) had to be imported from the internal modules that define them."""

from __future__ import annotations

import importlib

import pytest

HOMES = {"ResumeMismatchError": "graph.thread_guard", "ThreadInUseError": "graph.thread_guard",
         "RunIdClaimed": "graph.thread_claims", "RunClaimFailed": "graph.thread_claims",
         "StoreError": "graph.stores", "ContractFrozenError": "graph.state", "SettingsError": "graph.settings"}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_error_of_the_public_api_is_exported_from_graph(name):
    import graph

    assert name in graph.__all__
    assert getattr(graph, name) is getattr(importlib.import_module(HOMES[name]), name)
    assert issubclass(getattr(graph, name), Exception)
