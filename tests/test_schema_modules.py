"""graph.schemas is split by concern: the inspection step's records and tool-argument schemas live in
graph.inspection_schemas. Every name stays importable from graph.schemas (the same object), the checkpoint
serializer allow-lists the moved records, and a checkpoint that names a record at its old path still decodes."""

from __future__ import annotations

from pathlib import Path

import pytest

MOVED = ["PLAN_VIEWS", "TRACKS_PER_ROUND", "VIEW_FRAMES", "CropBox", "FrameView", "InspectionPlan", "PlanPart",
         "PlanTrack", "PlanView", "TrackArgs", "TrackRequest", "cap_view", "crop_box", "entry_error", "no_nan"]


def test_the_inspection_schemas_are_their_own_module_and_still_importable_from_graph_schemas():
    from graph import inspection_schemas, schemas

    for name in MOVED:
        assert getattr(schemas, name) is getattr(inspection_schemas, name), name
    assert set(MOVED) <= set(schemas.__all__)
    assert inspection_schemas.InspectionPlan.__module__ in schemas.RECORD_MODULES


@pytest.mark.parametrize("module", ["schemas", "inspection_schemas"])
def test_each_schema_module_keeps_under_400_lines(module):
    path = Path(__file__).resolve().parents[1] / "graph" / f"{module}.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 400


def test_moved_records_round_trip_through_the_trace_serializer_also_under_their_old_path():
    """A checkpoint written before the split names InspectionPlan as graph.schemas.InspectionPlan: it must still
    decode (to the same class), and one written now (graph.inspection_schemas) too."""
    from graph.inspection_schemas import FrameView, InspectionPlan, TrackRequest
    from graph.tracing import traces_serde

    serde = traces_serde()
    plan = InspectionPlan(views=[FrameView(frames=[1, 2], box=[0, 0, 0.5, 0.5])],
                          tracks=[TrackRequest(start_frame=0, end_frame=4)], rationale="check R2")
    assert serde.loads_typed(serde.dumps_typed({"plan": plan}))["plan"] == plan
    old_path = type("InspectionPlan", (InspectionPlan,), {"__module__": "graph.schemas"})  # as written before
    back = serde.loads_typed(serde.dumps_typed({"plan": old_path.model_validate(plan.model_dump())}))["plan"]
    assert type(back) is InspectionPlan and back == plan
