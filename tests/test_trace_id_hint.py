"""`raa trace` / `raa report` of a run id pasted with blanks around it (a copied table cell, a trailing newline):
the error named no run, as only traced ids that start with the text given were suggested."""

from __future__ import annotations

import pytest
from test_tracing import _graph

from graph.tracing import RunNotFoundError, open_saver, read_trace


@pytest.mark.parametrize("given", [" run-abc123", "run-abc123 ", "run-abc123\n", "\trun-abc123 "])
def test_a_run_id_with_blanks_around_it_names_the_run(given, tmp_path):
    saver = open_saver(tmp_path / "t.sqlite")
    _graph(saver).invoke({"video": "/clips/a.mp4", "instruction": "x"}, {"configurable": {"thread_id": "run-abc123"}})
    with pytest.raises(RunNotFoundError, match=r"did you mean run-abc123\?"):
        read_trace(saver, given)
