"""load_manifest and a row's ``width`` / ``height``: every other optional field was type-checked, these two
not, so "128", 128.5, -1 or true came through as the clip's size (graph/demo.py compares them with the
suite's side, the reports print them). Refused now like the others: a ManifestError naming the line and
the field."""

from __future__ import annotations

import json

import pytest

from evals.clipsuite import ManifestError, load_manifest

GOOD = {"path": "a.mp4", "instruction": "Push it.", "label": "ordinary"}


@pytest.mark.parametrize("field", ["width", "height"])
@pytest.mark.parametrize("value,problem", [
    ("128", "wrong type"), (128.0, "wrong type"), (128.5, "wrong type"), (True, "wrong type"),
    ([128], "wrong type"), (0, "must be >= 1"), (-64, "must be >= 1"),
])
def test_a_bad_width_or_height_names_the_line_and_field(tmp_path, field, value, problem):
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, field: value}) + "\n")
    with pytest.raises(ManifestError, match=problem) as err:
        load_manifest(path)
    assert f"{path}:2:" in str(err.value) and field in str(err.value)


def test_a_whole_positive_size_or_none_is_read(tmp_path):
    rows = [{**GOOD, "width": 128, "height": 96}, {**GOOD, "width": None}, GOOD]
    path = tmp_path / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_manifest(path)
    assert [(r.get("width"), r.get("height")) for r in got] == [(128, 96), (None, None), (None, None)]
