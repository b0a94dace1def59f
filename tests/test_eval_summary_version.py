"""summary.json's `schema_version` as `raa eval report` reads it (`evals.report_index.read_summary`, then `scope_of`): a file without it
(written before it existed: version 1) is read as before, since the fields the report takes (paths, presets, run,
manifest) kept their meaning; a version newer than this code knows (a folder a newer raa wrote) or one that is not
an integer (a hand edit) is a `SummaryError` naming the file and the version. It was read as if its fields meant
what this code thinks they mean. A newer one is refused though the fields the report reads keep their meaning: the
page's table is computed again by this code's metric definitions, which a newer version says changed."""

from __future__ import annotations

import json

import pytest

from evals.report_index import SummaryError, read_summary, scope_of
from evals.table import SUMMARY_SCHEMA_VERSION


def _summary(tmp_path, **fields):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"presets": ["full"], "paths": ["a.mp4"], "clips": 1, **fields}))
    return path


def _scope(path):
    return scope_of(read_summary(path), path)


def test_a_summary_without_a_version_and_one_of_each_known_version_is_read(tmp_path):
    assert _scope(_summary(tmp_path)).paths == {"a.mp4"}
    for version in range(1, SUMMARY_SCHEMA_VERSION + 1):
        assert _scope(_summary(tmp_path, schema_version=version)).presets == {"full"}


def test_a_newer_summary_is_refused_naming_its_version(tmp_path):
    path = _summary(tmp_path, schema_version=SUMMARY_SCHEMA_VERSION + 1)
    with pytest.raises(SummaryError, match=rf"{path}.*schema_version {SUMMARY_SCHEMA_VERSION + 1}.*newer") as err:
        read_summary(path)
    assert "table.md" in str(err.value)  # why: this raa computes the page's table by its own definitions


@pytest.mark.parametrize("version", ["2", True, 0, 2.5, None])
def test_a_version_that_is_not_a_known_integer_is_refused(tmp_path, version):
    path = _summary(tmp_path, schema_version=version)
    with pytest.raises(SummaryError, match=str(path)):
        read_summary(path)
