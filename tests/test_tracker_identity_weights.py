"""tools.toolbox.tracker_identity / scorer_identity keep configs with different weights apart (the frame cache's
track keys hold it: two agents sharing one cache took each other's tracks)."""

from tools.motion import CoTracker3Tracker
from tools.toolbox import tracker_identity


def test_pretrained_and_random_weights_from_one_hub_dir_have_different_identities():
    pretrained = CoTracker3Tracker(hub_dir="/repo/co-tracker")
    random = CoTracker3Tracker(hub_dir="/repo/co-tracker", allow_random_weights=True)
    assert tracker_identity(pretrained) != tracker_identity(random)


def test_two_randomly_initialised_trackers_never_share_an_identity():
    a = CoTracker3Tracker(allow_random_weights=True)
    b = CoTracker3Tracker(allow_random_weights=True)
    assert tracker_identity(a) != tracker_identity(b)


def test_one_config_keeps_one_identity():
    a = CoTracker3Tracker(checkpoint="/w/scaled_offline.pth", device="cpu")
    b = CoTracker3Tracker(checkpoint="/w/scaled_offline.pth", device="cpu")
    assert tracker_identity(a) == tracker_identity(b)


def test_trackers_given_their_own_predictors_never_share_an_identity():
    a = CoTracker3Tracker(predictor=object())
    b = CoTracker3Tracker(predictor=object())
    assert tracker_identity(a) != tracker_identity(b)
    assert tracker_identity(a) != tracker_identity(CoTracker3Tracker())  # nor one that loads the default weights


def test_scorers_given_their_own_models_never_share_an_identity():
    from types import SimpleNamespace

    from tools.surprise import VJEPA2SurpriseScorer
    from tools.toolbox import scorer_identity

    config = SimpleNamespace(frames_per_clip=64, crop_size=256, tubelet_size=2, patch_size=16)
    a = VJEPA2SurpriseScorer(model=SimpleNamespace(config=config))
    b = VJEPA2SurpriseScorer(model=SimpleNamespace(config=config))
    assert scorer_identity(a) != scorer_identity(b)
    assert scorer_identity(a) != scorer_identity(VJEPA2SurpriseScorer())  # nor the default hub model's
