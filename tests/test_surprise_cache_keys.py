"""The surprise job key holds which scorer ran (`ToolProvider.surprise_id`: V-JEPA 2's model, dtype, device and
top_k, the tool service, an injected object), as the track keys hold the tracker. Agents with different surprise
settings sharing one frame cache (`score_batch(frame_store=...)`) got another scorer's surprise: the key was only
(clip version, frames, short side)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from graph_scripts import FakeSurprise

from graph.context import AgentTools, tool_provider
from graph.frame_store import FrameStore
from graph.nodes.surprise import _job, started_surprise
from tools.settings import ToolSettings
from tools.surprise import VJEPA2SurpriseScorer
from tools.toolbox import Toolbox


def _scored(store: FrameStore, provider, clip) -> None:
    """Score `clip` (33 frames) in `store` with `provider`'s scorer and wait for it (after stat'ing the clip, as
    the quality step does: the key holds the version found then)."""
    store.meta(str(clip))
    _job(SimpleNamespace(frames=store, tools=provider), str(clip), 33, start=True).result(timeout=60)


def _seen(store: FrameStore, provider, clip):
    return started_surprise(SimpleNamespace(frames=store, tools=provider), str(clip), 33)


def _with_fake(settings: ToolSettings):
    """The provider a Toolbox with `settings` gives, its scorer replaced by a fake (nothing loads)."""
    fake = FakeSurprise()
    return dataclasses.replace(tool_provider(Toolbox(settings)), surprise_factory=lambda: fake)


def test_surprise_of_one_injected_scorer_is_not_another_ones(clip):
    store = FrameStore()
    a, b = (tool_provider(AgentTools(surprise=FakeSurprise())) for _ in range(2))
    _scored(store, a, clip)
    assert _seen(store, a, clip) is not None
    assert _seen(store, b, clip) is None


def test_surprise_keys_differ_by_model_dtype_device_top_k_and_service(clip):
    store = FrameStore()
    base = ToolSettings()
    _scored(store, _with_fake(base), clip)
    assert _seen(store, _with_fake(base), clip) is not None  # the same settings share the scores
    for other in (dict(vjepa_model="/models/other-vjepa2"), dict(vjepa_dtype="bfloat16"), dict(device="cuda"),
                  dict(surprise_top_k=5), dict(tools_url="http://127.0.0.1:9")):
        assert _seen(store, _with_fake(base.model_copy(update=other)), clip) is None, other


def test_an_injected_vjepa2_scorer_and_the_toolbox_with_its_settings_share_scores(clip):
    injected = tool_provider(AgentTools(surprise=VJEPA2SurpriseScorer(ToolSettings().vjepa_model)))
    assert injected.surprise_id == tool_provider(Toolbox(ToolSettings())).surprise_id
    assert injected.surprise_id != tool_provider(AgentTools(surprise=VJEPA2SurpriseScorer("/m/x"))).surprise_id

