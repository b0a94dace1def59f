"""`training.generate`'s resume (`training.generate_folder.resume_keys`) kept a manifest row whose required field was
removed by hand: a row without ``key`` added the key "None" (its video, never known as done, was generated again and
a second row appended beside the first, which `raa eval compare` then skipped as "no 'key' field to pair by"), and a
row without ``instruction`` reached `raa score-batch` as a bad manifest line. Such a row is dropped now, as a torn one
is, so its video is generated again under a whole row."""

from __future__ import annotations

import json

import pytest

from training.generate_folder import resume_keys


def _row(key: str) -> dict:
    return {"path": f"videos/{key}.mp4", "instruction": "stack", "key": key, "prompt": 0, "sample": 0,
            "iteration": 3}


@pytest.mark.parametrize("field", ["key", "instruction", "path"])
def test_a_row_missing_a_required_field_is_dropped_and_generated_again(tmp_path, field):
    (tmp_path / "videos").mkdir()
    for key in ("p0_s0", "p0_s1"):
        (tmp_path / "videos" / f"{key}.mp4").write_bytes(b"v")
    broken = {k: v for k, v in _row("p0_s1").items() if k != field}
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps(_row("p0_s0")) + "\n" + json.dumps(broken) + "\n")
    assert resume_keys(manifest, 3) == {"p0_s0"}
    assert [json.loads(line) for line in manifest.read_text().splitlines()] == [_row("p0_s0")]


@pytest.mark.parametrize("value", [None, 5, ""])
def test_a_required_field_that_is_no_text_is_dropped(tmp_path, value):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "p0_s0.mp4").write_bytes(b"v")
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({**_row("p0_s0"), "key": value}) + "\n")
    assert resume_keys(manifest, 3) == set() and manifest.read_text() == ""
