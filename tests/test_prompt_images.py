"""Prompt images as the policy is conditioned on them (training/data.py): 16-bit and unknown-range pixels,
unreadable, truncated and missing files, EXIF orientation (and EXIF that cannot be read), crop or stretch."""

from __future__ import annotations

import re

import numpy as np
import pytest

from training.config import PromptSpec
from training.data import load_frame


def test_a_16_bit_frame_is_rescaled_not_clipped_to_white(tmp_path):
    """PIL's convert("RGB") clips mode I;16 / I at 255: a full 16-bit gradient came out 99% white."""
    from PIL import Image

    from training.data import check_images

    levels = np.linspace(0, 65535, 16 * 16).round().astype(np.uint16).reshape(16, 16)
    expected = np.repeat(np.round(levels / 257).astype(np.uint8)[..., None], 3, axis=-1)
    Image.fromarray(levels).save(tmp_path / "g16.png")
    Image.fromarray(levels).save(tmp_path / "g16.pgm")  # Pillow opens a 16-bit PGM as mode I
    for name, mode in (("g16.png", "I;16"), ("g16.pgm", "I")):
        spec = PromptSpec("t", image=str(tmp_path / name))
        assert Image.open(spec.image).mode == mode
        frame = load_frame(spec, 16, 16, "stretch")
        assert np.array_equal(frame, expected), name
        assert check_images([spec]) == []


def test_a_frame_of_unknown_range_is_refused_by_name(tmp_path):
    from PIL import Image

    from training.data import check_images

    Image.fromarray(np.full((8, 8), 0.5, np.float32)).save(tmp_path / "f.tif")
    Image.fromarray(np.full((8, 8), 70000, np.int32)).save(tmp_path / "big.tif")
    # a 32-bit TIFF of 0..255 values was read as 0..65535: almost black (its range is not in the file)
    Image.fromarray(np.arange(64, dtype=np.int32).reshape(8, 8) * 4).save(tmp_path / "g32.tif")
    wide = "is a 32-bit or signed integer image (PIL mode I from a TIFF file)"
    for name, message in (("f.tif", "is a floating-point image (PIL mode F)"), ("big.tif", wide), ("g32.tif", wide)):
        spec = PromptSpec("t", image=str(tmp_path / name))
        with pytest.raises(ValueError, match=rf"prompt image {tmp_path / name} .*" + re.escape(message)):
            load_frame(spec, 8, 8)
        [problem] = check_images([spec])  # at launch, not at the rollout that draws it
        assert str(tmp_path / name) in problem and message in problem


def test_check_images_names_missing_and_unreadable_images(tmp_path):
    from PIL import Image

    from training.data import check_images

    Image.fromarray(np.zeros((4, 4, 4), np.uint8)).save(tmp_path / "rgba.png")  # RGBA: fine, converted on load
    (tmp_path / "notes.png").write_text("not an image")
    specs = [PromptSpec(text="a", image=str(tmp_path / "rgba.png")), PromptSpec(text="b"),
             PromptSpec(text="c", image=str(tmp_path / "gone.png")), PromptSpec(text="d", image=str(tmp_path / "notes.png"))]
    problems = check_images(specs)
    assert len(problems) == 2 and "not found" in problems[0] and "gone.png" in problems[0]
    assert "notes.png cannot be read" in problems[1]
    assert check_images(specs[:2]) == []
    assert len(check_images(specs[2:] * 10, limit=3)) == 3
    assert load_frame(specs[0], 4, 4).shape == (4, 4, 3)


def test_check_images_names_truncated_images(tmp_path):
    """A truncated PNG or JPEG has a valid header: reading only the header passed it at launch, and load_frame
    raised OSError at the rollout that drew it."""
    import io

    from PIL import Image

    from training.data import check_images

    pixels = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    specs = []
    for name, fmt in (("cut.png", "PNG"), ("cut.jpg", "JPEG")):
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, fmt)
        (tmp_path / name).write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])
        specs.append(PromptSpec(text=name, image=str(tmp_path / name)))
        with pytest.raises(OSError):
            load_frame(specs[-1], 32, 32)
    problems = check_images(specs)
    assert len(problems) == 2
    for spec, problem in zip(specs, problems, strict=True):
        assert problem.startswith(f"prompt image {spec.image} cannot be read (OSError") and "truncated" in problem


def test_prompt_images_are_upright_and_fitted_by_crop_or_stretch(tmp_path):
    from PIL import Image

    # 40x20 (wide): left half red, right half blue, a green column in the middle 10 pixels
    img = np.zeros((20, 40, 3), np.uint8)
    img[:, :20] = (255, 0, 0)
    img[:, 20:] = (0, 0, 255)
    img[:, 15:25] = (0, 255, 0)
    Image.fromarray(img).save(tmp_path / "wide.png")
    spec = PromptSpec(text="t", image=str(tmp_path / "wide.png"))
    crop = load_frame(spec, 20, 20, "crop")  # keeps the centre 20x20: red 5, green 10, blue 5 columns
    assert crop.shape == (20, 20, 3)
    assert crop[10, 2].tolist() == [255, 0, 0] and crop[10, 10].tolist() == [0, 255, 0]
    assert crop[10, 17].tolist() == [0, 0, 255]
    stretch = load_frame(spec, 20, 20, "stretch")  # squeezed: the green column is 5 wide, red 10
    assert stretch[10, 5].tolist() == [255, 0, 0] and stretch[10, 14].tolist() == [0, 0, 255]
    assert (stretch[10, :, 1] > 200).sum() < (crop[10, :, 1] > 200).sum()
    with pytest.raises(ValueError, match="image fit must be"):
        load_frame(spec, 20, 20, "pad")
    # a photo stored sideways with EXIF orientation 6 (rotate 90 degrees clockwise to view)
    tall = np.zeros((40, 20, 3), np.uint8)
    tall[:20] = (255, 0, 0)  # top half red as stored
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(tall).save(tmp_path / "phone.jpg", exif=exif, quality=95)
    upright = load_frame(PromptSpec(text="t", image=str(tmp_path / "phone.jpg")), 20, 40, "stretch")
    assert upright[10, 35, 0] > 200 and upright[10, 5, 0] < 60  # stored top is shown on the right


def test_an_image_whose_exif_cannot_be_read_is_named(tmp_path):
    """A PNG whose eXIf chunk is not TIFF data: ImageOps.exif_transpose raised a bare SyntaxError ("not a TIFF
    file"), out of check_images at launch (no file named) and out of load_frame at the rollout."""
    from PIL import Image

    from training.data import check_images

    Image.new("RGB", (8, 4), (1, 2, 3)).save(tmp_path / "bad_exif.png", exif=b"Exif\x00\x00garbage!!")
    spec = PromptSpec("t", image=str(tmp_path / "bad_exif.png"))
    message = "EXIF metadata cannot be read"
    with pytest.raises(ValueError, match=rf"prompt image {re.escape(spec.image)}\b.*{message}"):
        load_frame(spec, 4, 4)
    [problem] = check_images([spec])
    assert spec.image in problem and message in problem
