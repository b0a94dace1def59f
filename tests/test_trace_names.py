"""A clip whose file name is not UTF-8 (Python's str holds its bytes as lone surrogates, surrogateescape) was
stored in the trace as "?" by LangGraph's msgpack serializer, so `raa report` / `raa trace` named and looked for
another file. Such strings now round-trip through the trace serializer."""

from __future__ import annotations

import asyncio
import os

from graph_scripts import moving_square
from test_run_ids import INSTRUCTION, _agent_on


def test_strings_with_lone_surrogates_round_trip_through_the_trace_serializer():
    from graph.tracing import traces_serde

    serde = traces_serde()
    value = {"video": "/clips/a\udcffb.mp4", "steps": [{"note": "x\udcfe", "ok": 1}], "n": 2}
    assert serde.loads_typed(serde.dumps_typed(value)) == value
    plain = {"video": "/clips/ab.mp4", "steps": [1, "é"]}
    assert serde.loads_typed(serde.dumps_typed(plain)) == plain


def test_a_clip_with_a_non_utf8_name_is_found_again_from_its_trace(tmp_path):
    from graph.api import arun_agent
    from graph.tracing import open_saver, read_trace

    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9")  # Latin-1 bytes: no UTF-8 name
    os.makedirs(folder)
    clip = str(moving_square(os.path.join(folder, "clip.mp4")))
    db = tmp_path / "traces.sqlite"
    result = asyncio.run(arun_agent(_agent_on(db), clip, INSTRUCTION, "latin", "decomposed"))
    assert result.status == "scored", result.reasons
    video = read_trace(open_saver(db, read_only=True), "latin").values["video"]
    assert video == clip and os.path.isfile(video)
