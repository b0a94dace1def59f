"""tools.toolbox.tracker_identity keeps CoTracker3 configs that load different weights apart (the frame cache's
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
