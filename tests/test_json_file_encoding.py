"""JSON files read with `Path.read_text()` were decoded in the system's default encoding (LANG=C without Python's
UTF-8 mode, a Windows code page), not as UTF-8: a file of non-ASCII text that this repo wrote as UTF-8 read as
unreadable (a checkpoint's layout.json, wandb.json, prompts.json, export.json, a model's configs and weight index)
or as other text. They are read as UTF-8 now (`tools.jsonl.parsed_file` / `json_text`), a byte-order mark skipped;
the eval folder's summary.json and started.json (read as UTF-8 already) answer a non-UTF-8 file as `parsed_file`
does. Each test reads under a default encoding of ASCII: `Path.read_text` without an encoding is patched to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NON_ASCII = "tâche — 積み木"


@pytest.fixture
def ascii_default(monkeypatch):
    real = Path.read_text

    def read_text(self, encoding=None, errors=None, **kwargs):
        return real(self, encoding or "ascii", errors, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)


def _write(path: Path, value) -> Path:
    path.write_bytes(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    return path


def test_checkpoint_records(tmp_path, ascii_default):
    from training.prompt_stamp import prompt_change_warning
    from training.resume import read_layout, read_schedule, read_world
    from training.wandb_log import saved_run_id

    _write(tmp_path / "layout.json", {"zero_stage": 2, "dtype": "bf16", "world_size": 4, "note": NON_ASCII,
                                      "lr_schedule": {"name": NON_ASCII}})
    assert read_layout(tmp_path) is not None and read_world(tmp_path) == 4
    assert read_schedule(tmp_path) == {"name": NON_ASCII}
    _write(tmp_path / "wandb.json", {"project": NON_ASCII, "id": "run1"})
    assert saved_run_id(tmp_path / "wandb.json", NON_ASCII) == "run1"
    stamp = {"count": 3, "sha256": "abc", "dataset_file": NON_ASCII}
    _write(tmp_path / "prompts.json", {**stamp, "sha256": "def"})
    assert "changed" in (prompt_change_warning(tmp_path, stamp) or "")  # the record was read, and differs


def test_export_label(tmp_path, ascii_default):
    from training.report_exports import final_export_label

    (tmp_path / "final").mkdir()
    _write(tmp_path / "final" / "export.json", {"iteration": 7, "source": f"/r/{NON_ASCII}"})
    assert final_export_label(tmp_path).startswith(f"iteration 7 (from {NON_ASCII})")


def test_model_configs_and_weight_index(tmp_path, ascii_default):
    from graph.model_files import _safetensors_names
    from tools.weight_index import weights_problem
    from training.model_check import _json

    assert _json(_write(tmp_path / "config.json", {"name": NON_ASCII})) == {"name": NON_ASCII}
    index = _write(tmp_path / "model.safetensors.index.json",
                   {"metadata": {"by": NON_ASCII}, "weight_map": {"a.weight": "model-1.safetensors"}})
    assert _safetensors_names(index) == {"a.weight"}
    (tmp_path / "model-1.safetensors").write_bytes(b"")
    assert weights_problem(lambda name: p if (p := tmp_path / name).is_file() else None) is None


def test_eval_records_with_a_byte_order_mark_and_not_utf8(tmp_path):
    from evals.report_index import SummaryError, read_summary, scope_of
    from tests.unfinished_runs import unfinished_run

    summary = tmp_path / "summary.json"
    summary.write_bytes(b"\xef\xbb\xbf" + json.dumps({"paths": ["/a.mp4"], "presets": ["full"], "run": "r1"}).encode())
    assert scope_of(read_summary(summary), summary).paths == {"/a.mp4"}
    (tmp_path / "started.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({"run": "r2", "manifest": "/m"}).encode())
    assert unfinished_run(tmp_path)["run"] == "r2"  # a BOM made it no record: the unfinished run went unsaid
    summary.write_bytes(b'{"paths": ["/caf\xe9.mp4"]}')
    with pytest.raises(SummaryError, match=r"not UTF-8 text \(byte 0xe9 at line 1 column 17\): save the file as UTF-8"):
        read_summary(summary)
    with pytest.raises(SummaryError, match=r"save the file as UTF-8\); rerun"):  # no "line 1 column 1 (char 0)"
        read_summary(summary)
