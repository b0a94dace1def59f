"""Training-side readers that asked `Path.is_file` and then read the file by name: a file removed in between (an
editor that saves by moving the old file aside first, `training.export` replacing an export folder, a run folder
cleaned meanwhile) raised a bare FileNotFoundError, or was named unreadable, where their answer for no file is their
own: `read_mapping` "config file not found", `read_export` "not a policy export", `final_export_label` "no",
`read_run` a run without settings, the prompt file "prompt file not found". Now each reads from one look
(`tools.file_kinds.read_at`)."""

from __future__ import annotations

import json

import pytest

from tests.path_calls import removed_after_first_look
from training.config import ConfigError
from training.config_io import read_mapping
from training.data import load_prompts
from training.export_folder import ExportError, read_export
from training.report_exports import final_export_label
from training.run_dir import EXPORT_FILE
from training.run_files import read_run


def test_read_mapping_of_a_config_removed_after_its_look(tmp_path, monkeypatch):
    config = tmp_path / "c.yaml"
    config.write_text("steps: 3\n")
    seen = removed_after_first_look(monkeypatch, config)
    try:
        got = read_mapping(config)
    except ConfigError as exc:
        assert str(exc) == f"config file not found: {config}"
    else:
        assert got == {"steps": 3}
    monkeypatch.undo()
    assert seen and not config.exists()


def test_read_export_of_an_export_json_removed_after_its_look(tmp_path, monkeypatch):
    info = tmp_path / EXPORT_FILE
    info.write_text(json.dumps({"format": "none of ours"}))
    seen = removed_after_first_look(monkeypatch, info)
    with pytest.raises(ExportError, match=f"^{tmp_path} is not a policy export|unknown export format"):
        read_export(tmp_path)
    monkeypatch.undo()
    assert seen and not info.exists()


def test_final_export_label_of_an_export_json_removed_after_its_look(tmp_path, monkeypatch):
    info = tmp_path / "final" / EXPORT_FILE
    info.parent.mkdir()
    info.write_text(json.dumps({"iteration": 4}))
    seen = removed_after_first_look(monkeypatch, info)
    label = final_export_label(tmp_path)
    monkeypatch.undo()
    assert seen and not info.exists()
    assert label == "no" or label.startswith("iteration 4"), label


def test_read_run_of_a_config_yaml_removed_after_its_look(tmp_path, monkeypatch):
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"iteration": 1}) + "\n")
    config = tmp_path / "config.yaml"
    config.write_text("steps: 3\n")
    seen = removed_after_first_look(monkeypatch, config)
    files = read_run(tmp_path)
    monkeypatch.undo()
    assert seen and not config.exists()
    assert files.config in ({}, {"steps": 3}), files.config


def test_a_prompt_file_removed_after_its_look(tmp_path, monkeypatch):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"text": "push the block"}) + "\n")
    seen = removed_after_first_look(monkeypatch, prompts)
    try:
        got = load_prompts([], str(prompts))
    except FileNotFoundError as exc:
        assert str(exc) == f"prompt file not found: {prompts}"
    else:
        assert [p.text for p in got] == ["push the block"]
    monkeypatch.undo()
    assert seen and not prompts.exists()
