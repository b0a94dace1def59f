"""`raa doctor` with RAA_VJEPA_MODEL at a path that is no folder says so and what to set.

A missing absolute path read "neither a folder nor a hub id (Repo id must be in the form ...)": the setting,
huggingface_hub's words about repo ids, and no fix. It now says the path does not exist (or is a file) and
what RAA_VJEPA_MODEL takes, as the message for a hub id missing from the cache does.
"""

from __future__ import annotations

import pytest

from graph.doctor_tools import vjepa_check
from tools.settings import ToolSettings

FIX = ("a local V-JEPA 2 folder", "config.json", "weights", "hub id", "Hugging Face cache", "--preset no_wmreward")


def _detail(model: str) -> str:
    check = vjepa_check(ToolSettings(vjepa_model=model))
    assert check.status == "problem", check
    assert f"RAA_VJEPA_MODEL={model}" in check.detail and "Repo id must" not in check.detail, check.detail
    assert all(part in check.detail for part in FIX), check.detail
    return check.detail


def test_a_missing_absolute_path_says_it_does_not_exist_and_what_to_set(tmp_path):
    missing = tmp_path / "models" / "vjepa2"
    assert "path does not exist" in _detail(str(missing))


@pytest.mark.parametrize("relative", ["./vjepa2", "../models/vjepa2"])
def test_a_missing_relative_path_too(tmp_path, monkeypatch, relative):
    monkeypatch.chdir(tmp_path)
    assert "path does not exist" in _detail(relative)


def test_a_file_is_not_a_folder(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"w")
    assert "is a file, not a folder" in _detail(str(weights))


def test_a_name_that_is_neither_still_says_what_to_set():
    detail = _detail("my vjepa")
    assert "neither an existing folder nor a hub id" in detail
