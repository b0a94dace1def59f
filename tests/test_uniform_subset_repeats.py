"""`uniform_subset` over frames with repeats (an extra evidence tool's report naming frame 3 four times) picks
among the distinct frames: it picked positions and then dropped the repeats, so reflect showed the model 2 of a
report's frames where 4 distinct ones were there to show."""

from __future__ import annotations

import pytest

from tools.video import uniform_subset


@pytest.mark.parametrize(("items", "k", "expected"), [
    ([3, 3, 3, 3, 20, 40], 4, [3, 20, 40]),  # fewer distinct frames than asked: all of them
    ([5, 5, 5, 5, 5, 6, 7, 8], 3, [5, 7, 8]),
    ([3, 3, 3, 3, 10, 20, 30, 40], 4, [3, 10, 30, 40]),
    ([40, 3, 20, 3], 2, [3, 40]),  # in clip order, whatever the order given
])
def test_repeats_do_not_cost_frames(items, k, expected):
    assert uniform_subset(items, k) == expected


def test_distinct_frames_are_picked_as_before():
    assert uniform_subset(list(range(0, 32)), 4) == [0, 10, 21, 31]
    assert uniform_subset([2, 4, 6], 5) == [2, 4, 6] and uniform_subset([], 3) == []
