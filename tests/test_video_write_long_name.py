"""write_video's hidden temporary file beside the target must fit the file system's name limit whenever the
target's own name does (it is the target's name plus a unique part)."""

import os

import numpy as np

from tools.video import probe, write_video


def test_a_name_at_the_file_systems_limit_is_written(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    path = tmp_path / ("c" * (limit - len(".mp4")) + ".mp4")
    frames = np.random.default_rng(0).integers(0, 255, (3, 16, 16, 3), dtype=np.uint8)
    assert write_video(path, frames, fps=8) == path
    assert probe(path).frames == 3
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left
