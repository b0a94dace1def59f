"""`ToolSettings.from_env` at the edge: errors name the RAA_* variable the user set, path values are cleaned."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.settings import ToolSettings


@pytest.mark.parametrize(("var", "value", "field"), [
    ("RAA_QUALITY_MIN_FRAMES", "abc", "min_frames"),
    ("RAA_QUALITY_UNIFORM_FRACTION", "2", "uniform_frame_fraction"),
    ("RAA_TOOLS_TIMEOUT_S", "abc", "request_timeout_s"),
    ("RAA_TOOLS_RETRIES", "0", "retries"),
    ("RAA_SURPRISE_SHORT_SIDE", "10", "surprise_short_side"),
    ("RAA_TOOLS_DEVICE", "tpu", "device"),
])
def test_a_value_that_cannot_be_used_names_its_variable(var, value, field):
    with pytest.raises(ValueError) as info:
        ToolSettings.from_env({var: value})
    text = str(info.value)
    assert text.startswith(f"invalid RAA_* setting: {var}={value!r}: "), text
    assert "validation error" not in text and "errors.pydantic.dev" not in text


@pytest.mark.parametrize("var", ["RAA_SURPRISE_SHORT_SIDE", "RAA_TRACK_SHORT_SIDE", "RAA_EXTRA_SHORT_SIDE"])
def test_a_frame_size_that_is_no_number_says_full_is_accepted_too(var):
    """"abc" said only "write ASCII digits only": `full` (no downscaling) is the other value these take."""
    with pytest.raises(ValueError) as info:
        ToolSettings.from_env({var: "abc"})
    assert f"{var}='abc'" in str(info.value) and "or full (no downscaling)" in str(info.value)
    assert getattr(ToolSettings.from_env({var: "Full"}), var.removeprefix("RAA_").lower()) is None
    with pytest.raises(ValueError) as other:  # a number field that takes no word is not told about one
        ToolSettings.from_env({"RAA_TOOLS_RETRIES": "abc"})
    assert "full" not in str(other.value)


def test_every_bad_variable_is_named_and_a_token_is_never_echoed():
    with pytest.raises(ValueError) as info:
        ToolSettings.from_env({"RAA_TOOLS_MAX_FRAMES": "many", "RAA_TOOLS_TOKEN": "pässwort",
                               "RAA_TOOLS_URL": "http://h:1"})
    text = str(info.value)
    assert "RAA_TOOLS_MAX_FRAMES='many'" in text and "RAA_TOOLS_TOKEN must be printable ASCII" in text
    assert "pässwort" not in text


def test_model_and_path_variables_are_stripped_and_a_leading_tilde_is_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    s = ToolSettings.from_env({"RAA_VJEPA_MODEL": "  ~/models/vjepa2 ", "RAA_COTRACKER_CHECKPOINT": " ~/ck.pth",
                               "RAA_COTRACKER_HUB_DIR": "~/co-tracker\n", "RAA_TOOLS_DEVICE": " cuda "})
    assert s.vjepa_model == str(tmp_path / "models" / "vjepa2")
    assert s.cotracker_checkpoint == tmp_path / "ck.pth" and s.cotracker_hub_dir == tmp_path / "co-tracker"
    assert s.device == "cuda"
    hub = ToolSettings.from_env({"RAA_VJEPA_MODEL": " facebook/vjepa2-vitg-fpc64-256 "})
    assert hub.vjepa_model == "facebook/vjepa2-vitg-fpc64-256"  # a hub id stays a hub id
    assert ToolSettings.from_env({"RAA_VJEPA_MODEL": "/abs/dir"}).vjepa_model == str(Path("/abs/dir"))


def test_serve_tools_names_a_bad_variable_instead_of_a_traceback(tmp_path):
    import typer
    from typer.testing import CliRunner

    from tools.cli import serve_tools_command

    app = typer.Typer()
    app.command()(serve_tools_command)
    result = CliRunner().invoke(app, ["--allowed-root", str(tmp_path), "--no-surprise"],
                                env={"RAA_TOOLS_MAX_FRAMES": "many"})
    assert result.exit_code == 2 and result.exception is not None and not isinstance(result.exception, ValueError)
    assert "error: invalid RAA_* setting: RAA_TOOLS_MAX_FRAMES='many'" in result.output


def test_the_default_toolbox_keeps_the_tool_service_token(monkeypatch):
    # build_reward_agent without tools (score_video, `langgraph dev`) shares one Toolbox per tool settings,
    # keyed by their JSON: the token came back from it as the mask "**********", so every request to a
    # token-protected tool service was refused (401) and every run with motion or surprise ineligible
    import graph.builder as builder
    from graph import AgentConfig, build_reward_agent
    from graph.backbone import Backbone
    from graph.testing import ScriptedChatModel

    monkeypatch.setenv("RAA_TOOLS_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RAA_TOOLS_TOKEN", "s3cret-token")
    built = []
    shared = builder._shared_toolbox
    monkeypatch.setattr(builder, "_shared_toolbox", lambda *key: built.append(shared(*key)) or built[-1])
    build_reward_agent(AgentConfig(preset="full"), backbone=Backbone(ScriptedChatModel([])), checkpointer=False)
    assert len(built) == 1 and built[0].uses_service and built[0].settings.token() == "s3cret-token"


@pytest.mark.parametrize("token", ["s3cret ", "s3cret  "])
def test_a_token_ending_in_a_space_is_refused_at_the_edge(tmp_path, token):
    """A token with a trailing space (an env file's "RAA_TOOLS_TOKEN=s3cret ") passed the printable-ASCII check,
    and then no request could carry it: httpx refused the header ("Illegal header value"), which the client
    reported as a transport fault saying the request was sent, and a server strips the space it receives, so
    one started with it answered 401 to everyone."""
    from tools.client import ToolServiceClient
    from tools.motion import LKTracker
    from tools.service import create_app

    with pytest.raises(ValueError, match="RAA_TOOLS_TOKEN ends in a space") as info:
        ToolSettings.from_env({"RAA_TOOLS_URL": "http://127.0.0.1:9", "RAA_TOOLS_TOKEN": token})
    assert "s3cret" not in str(info.value)
    with pytest.raises(ValueError, match="the tool service token ends in a space"):
        ToolServiceClient("http://127.0.0.1:9", token=token)
    with pytest.raises(ValueError, match="the service token ends in a space"):
        create_app(ToolSettings(), tmp_path, token=token, tracker=LKTracker(), enable_surprise=False)
    assert ToolSettings(tools_token=" s3cret").token() == " s3cret"  # a leading space travels (and is kept)


def test_the_noise_thresholds_are_read_from_the_environment():
    """`min_neighbour_correlation` and `min_noise_flatness` could only be set in code, while every other quality
    threshold had its RAA_QUALITY_* variable: a user whose clips read as static could not tune them."""
    s = ToolSettings.from_env({"RAA_QUALITY_MIN_NEIGHBOUR_CORRELATION": "0.1", "RAA_QUALITY_MIN_NOISE_FLATNESS": " 0.45 "})
    assert s.quality.min_neighbour_correlation == 0.1 and s.quality.min_noise_flatness == 0.45
    with pytest.raises(ValueError, match=r"RAA_QUALITY_MIN_NOISE_FLATNESS='2'"):
        ToolSettings.from_env({"RAA_QUALITY_MIN_NOISE_FLATNESS": "2"})
    with pytest.raises(ValueError, match=r"RAA_QUALITY_MIN_NEIGHBOUR_CORRELATION='-3'"):
        ToolSettings.from_env({"RAA_QUALITY_MIN_NEIGHBOUR_CORRELATION": "-3"})


def test_the_quality_analysis_size_is_read_from_the_environment():
    """`analysis_long_side` was the one quality setting without a RAA_QUALITY_* variable."""
    assert ToolSettings.from_env({"RAA_QUALITY_ANALYSIS_LONG_SIDE": " 128 "}).quality.analysis_long_side == 128
    assert ToolSettings.from_env({}).quality.analysis_long_side == 64
    with pytest.raises(ValueError, match=r"RAA_QUALITY_ANALYSIS_LONG_SIDE='4'"):
        ToolSettings.from_env({"RAA_QUALITY_ANALYSIS_LONG_SIDE": "4"})
