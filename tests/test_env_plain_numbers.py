"""Numbers read from RAA_* variables must be written plainly: an integer as ASCII digits (optional sign), and
no number with underscores or non-ASCII digits. Python's int()/float() (and pydantic's lax parsing) accept
"1_0" as 10, "١٠" as 10 and, for pydantic ints, "10.0" as 10: a typo ("1_0" for "10" or "1.0") was taken
silently. Every integer setting refuses them the same way, naming the variable."""

from __future__ import annotations

import pytest

from evals.judge import JudgeSettings
from graph.settings import BackboneSettings, SettingsError
from tools.settings import ToolSettings, ToolSettingsError

BACKBONE_INTS = {"RAA_MAX_RETRIES": "4", "RAA_SCHEMA_RETRIES": "2", "RAA_IMAGE_LONG_SIDE": "512",
                 "RAA_JPEG_QUALITY": "85", "RAA_MAX_TOKENS": "900"}
JUDGE_INTS = {"RAA_JUDGE_MAX_FRAMES": "64", "RAA_JUDGE_ATTEMPTS": "3"}
TOOL_INTS = {"RAA_SURPRISE_BATCH": "8", "RAA_SURPRISE_TOP_K": "3", "RAA_SURPRISE_SHORT_SIDE": "256",
             "RAA_TRACK_SHORT_SIDE": "256", "RAA_EXTRA_SHORT_SIDE": "256", "RAA_TOOLS_RETRIES": "3",
             "RAA_TOOLS_MAX_FRAMES": "1024", "RAA_QUALITY_MIN_FRAMES": "20"}
LOADERS = [(BackboneSettings.from_env, SettingsError, BACKBONE_INTS), (JudgeSettings.from_env, SettingsError, JUDGE_INTS),
           (ToolSettings.from_env, ToolSettingsError, TOOL_INTS)]
CASES = [(load, error, var, plain) for load, error, ints in LOADERS for var, plain in ints.items()]


@pytest.mark.parametrize(("load", "error", "var", "plain"), CASES)
@pytest.mark.parametrize("shape", ["underscore", "arabic_indic", "decimal"])
def test_an_integer_setting_refuses_a_value_that_is_not_plain_digits(load, error, var, plain, shape) -> None:
    load({var: plain})  # the plain spelling is fine
    load({var: f" +{plain} "})
    bad = {"underscore": f"{plain[0]}_{plain[1:] or '0'}" if len(plain) > 1 else f"0_{plain}",
           "arabic_indic": plain.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
           "decimal": f"{plain}.0"}[shape]
    with pytest.raises(error) as info:
        load({var: bad})
    assert var in str(info.value) and "plain" in str(info.value), str(info.value)


@pytest.mark.parametrize(("load", "error", "var"), [(BackboneSettings.from_env, SettingsError, "RAA_TIMEOUT_S"),
                                                    (JudgeSettings.from_env, SettingsError, "RAA_JUDGE_TIMEOUT_S"),
                                                    (ToolSettings.from_env, ToolSettingsError, "RAA_TOOLS_TIMEOUT_S")])
def test_a_number_setting_refuses_underscores(load, error, var) -> None:
    load({var: "120.5"})
    load({var: "1e2"})
    with pytest.raises(error) as info:
        load({var: "1_20"})
    assert var in str(info.value), str(info.value)
