"""`evals.contact.push_standoff` and `grasp_closed` (one bisection, `_first_clear`): the distance returned is where the
fingers clear the object (the clear end of the last interval, not the overlapping one), a hair less overlaps it, and
the square-on and turned cases give the sizes their docstrings name."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evals.contact import CONTACT_GAP, fingers_overlap, grasp_closed, push_standoff
from evals.scenes import FINGER_HALF, HALF, OPEN_GAP

HAIR = 1e-9


@pytest.mark.parametrize("shape, yaw", [("cube", 0.0), ("cube", math.pi / 4), ("cube", 0.3), ("cylinder", 1.0)])
def test_grasp_closed_is_the_first_clear_opening(shape, yaw):
    closed = grasp_closed(shape, yaw)
    assert not fingers_overlap(shape, yaw, np.zeros(2), closed)
    assert fingers_overlap(shape, yaw, np.zeros(2), closed - HAIR)


def test_grasp_closed_touches_a_square_on_object_and_reaches_further_on_a_turned_cube():
    touch = HALF + FINGER_HALF[0]
    assert grasp_closed("cylinder", 0.7) == pytest.approx(touch, abs=1e-9)
    assert grasp_closed("cube", 0.0) == pytest.approx(touch, abs=1e-9)
    assert grasp_closed("cube", math.pi / 4) > touch + 0.005  # a corner within the fingers' width


@pytest.mark.parametrize("shape, yaw, direction, opening", [
    ("cube", 0.0, (1.0, 0.0), OPEN_GAP), ("cube", math.pi / 4, (0.0, 1.0), 0.0), ("cube", 0.3, (1.0, 1.0), 0.02),
    ("cylinder", 0.0, (0.0, -1.0), 0.01), ("cylinder", 0.0, (-1.0, 0.2), 0.0)])
def test_push_standoff_is_the_first_clear_distance_behind_the_object(shape, yaw, direction, opening):
    d = np.asarray(direction) / np.linalg.norm(direction)
    standoff = push_standoff(shape, yaw, np.asarray(direction), opening)
    assert not fingers_overlap(shape, yaw, -d * standoff, opening, CONTACT_GAP)
    assert fingers_overlap(shape, yaw, -d * (standoff - HAIR), opening, CONTACT_GAP)


def test_push_standoff_of_closed_fingers_behind_a_square_on_cube():
    """Pushing along +y with the fingers together: the fingers' y half width behind the cube's face, plus the gap."""
    assert push_standoff("cube", 0.0, np.array([0.0, 1.0]), 0.0) == pytest.approx(
        HALF + FINGER_HALF[1] + CONTACT_GAP, abs=1e-9)
