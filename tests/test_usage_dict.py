"""graph.usage.Usage.as_dict / add keep the dataclasses.asdict contract (field names, order, values)."""

from __future__ import annotations

import dataclasses

from graph.usage import Usage


def test_as_dict_equals_asdict_in_field_order_and_is_a_fresh_dict():
    u = Usage(calls=1, images=2, input_tokens=3, output_tokens=4, cache_hits=5)
    got = u.as_dict()
    assert list(got.items()) == list(dataclasses.asdict(u).items())
    got["calls"] = 99
    assert u.calls == 1 and u.as_dict()["calls"] == 1


def test_add_sums_every_field():
    total = Usage(calls=1, images=1).add(Usage(calls=2, images=3, input_tokens=4, output_tokens=5, cache_hits=6))
    assert total == Usage(calls=3, images=4, input_tokens=4, output_tokens=5, cache_hits=6)
