"""Clip suite manifest rows name the generator version: the same (seed, preset, size) renders other clips after
the generator changed (push slip, partial pick_lift, missed attempts), so rendering part of a suite into a folder
written before kept the old clips' rows beside the new ones, one manifest mixing two generators."""

from __future__ import annotations

import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import pytest

from evals.clipsuite import (
    SUITE_VERSION,
    ClipSuiteError,
    ManifestError,
    load_manifest,
    make_clips,
    suite_specs,
)

SIDE = 32
GOOD = {"path": "a.mp4", "instruction": "Push it.", "label": "ordinary"}


def test_rows_carry_the_suite_version_and_an_older_suite_is_not_merged(tmp_path):
    suite, specs = tmp_path / "suite", suite_specs("small", 0)
    uniform, static = (next(s.name for s in specs if s.pattern == p) for p in ("uniform", "static"))
    manifest = make_clips(suite, names=[uniform], size=SIDE, progress=False)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["suite_version"] for r in rows] == [SUITE_VERSION]
    assert load_manifest(suite)[0]["suite_version"] == SUITE_VERSION
    old = "".join(json.dumps({k: v for k, v in r.items() if k != "suite_version"}) + "\n" for r in rows)
    manifest.write_text(old)  # as the generator before the version wrote it
    with pytest.raises(ClipSuiteError, match="another suite"):
        make_clips(suite, names=[static], size=SIDE, progress=False)
    assert manifest.read_text() == old


@pytest.mark.parametrize("value", ["2", 0, 1.5, True])
def test_a_bad_suite_version_names_the_line_and_field(tmp_path, value):
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps({**GOOD, "suite_version": value}) + "\n")
    with pytest.raises(ManifestError, match="suite_version"):
        load_manifest(path)
