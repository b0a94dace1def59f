"""An int temperature and the equal float are one sampling setting: the resume guard records both as the float
(`graph.context.backbone_settings`), so their stage keys must be one too. A non-OpenAI backbone given 1 keyed "1"
and one given 1.0 keyed "1.0": a run resumed at 1.0 passed the guard and asked the model again for every stage its
first part had answered. An OpenAI-family model's temperature was already keyed as a float
(`graph.model_request.requested`); the float keys pinned in tests/test_stage_key_pins.py are unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from graph.backbone import Backbone
from graph.context import backbone_settings
from graph.frame_store import FrameStore
from graph.testing import ScriptedChatModel

MSGS = [SystemMessage(content="# stage: judge\nJudge."), HumanMessage(content="ok?")]


def _bb(temperature) -> Backbone:
    return Backbone(ScriptedChatModel({}), model_name="m", temperature=temperature, endpoint="http://h:8000/v1")


@pytest.mark.parametrize("given, equal", [(1, 1.0), (2, 2.0), (np.float32(0.5), 0.5)], ids=["1", "2", "float32"])
def test_an_equal_temperature_of_another_type_is_the_same_key_and_record(given, equal) -> None:
    first, resumed = _bb(given), _bb(equal)
    frames = FrameStore()
    assert backbone_settings(first, frames) == backbone_settings(resumed, frames)  # the resume guard: the same run
    assert first.key_of("judge", MSGS, method="json_schema") == resumed.key_of("judge", MSGS, method="json_schema")
    assert type(first.temperature) is float


def test_an_int_zero_is_still_the_unkeyed_default() -> None:
    assert _bb(0).key_of("judge", MSGS, method="json_schema") == \
        Backbone(ScriptedChatModel({}), model_name="m", endpoint="http://h:8000/v1").key_of(
            "judge", MSGS, method="json_schema")


@pytest.mark.parametrize("given", [True, np.True_, float("nan"), np.float32("nan"), float("inf"), -0.5, "0.5"],
                         ids=["true", "numpy_true", "nan", "numpy_nan", "inf", "negative", "text"])
def test_a_temperature_that_is_no_finite_number_at_or_above_0_is_refused_at_build(given) -> None:
    """What RAA_TEMPERATURE refuses (graph.settings) the backbone refuses too, a bool besides: True was keyed `true`
    while the resume guard took it for 1.0 (True == 1.0), so a run resumed at 1.0 asked the model again; NumPy's
    True was no value the trace checkpointer writes (the run's quality step raised); a NaN is no temperature equal
    to itself (a resume of the same run refused, "temperature nan (agent nan)")."""
    with pytest.raises(ValueError, match="temperature"):
        _bb(given)
    backbone = _bb(0.5)
    with pytest.raises(ValueError, match="temperature"):
        backbone.temperature = given
    assert backbone.temperature == 0.5  # left as it was


@pytest.mark.parametrize("given", [None, 0, 0.0, 2, np.int64(1), np.float64(0.25)])
def test_a_finite_temperature_at_or_above_0_or_none_is_taken(given) -> None:
    assert _bb(given).temperature == (None if given is None else float(given))
