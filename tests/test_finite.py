"""training.finite.finite_number: the one finite-number test its callers (rewards, sum_reward, report, best,
metrics) shared as copies; same answers as those copies."""

from __future__ import annotations

import math

import pytest

from training.finite import finite_number


@pytest.mark.parametrize("value", [0, 1, -2.5, 1e308, 7])
def test_finite_numbers(value):
    assert finite_number(value) and finite_number(value, bools=True)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "1", None, [1.0]])
def test_not_finite_numbers(value):
    assert not finite_number(value) and not finite_number(value, bools=True)


def test_a_bool_is_a_number_only_when_asked():
    assert not finite_number(True) and finite_number(True, bools=True) and finite_number(False, bools=True)
