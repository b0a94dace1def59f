"""Training prompts: loading, synthetic initial frames and a resumable, seeded prompt order.

The order is a pure function of ``(seed, position)``: epoch ``e`` is a permutation of the prompts
drawn from ``derive_seed(seed, PROMPT_STREAM, e)`` (``order="derived"``), and ``position`` counts prompts
consumed so far over all ranks, so saving ``position`` in the checkpoint is enough to resume the exact stream.
It was drawn from ``seed + e`` (``order="seed_plus_epoch"``, kept for runs saved before): seed s + 1 then drew
epoch e + 1's order of seed s, so the runs of a seed sweep saw one prompt sequence shifted by an epoch.

Decisions where the issue was silent: images are turned upright by their EXIF orientation (a phone
photo of the scene is stored sideways with a rotation tag) and fitted to the run's width x height by
``image_fit``: "crop" (default) scales to cover and keeps the centre, "stretch" resizes without keeping
the aspect ratio (what this module did before: a 4:3 robot photo became a 16:9 scene squashed sideways);
keys of a JSONL prompt other than text / image / image_seed are
kept in ``PromptSpec.meta`` (training.generate writes them into its manifest); text / image / image_seed are
type-checked when the file is read (non-empty string / string or null / integer >= 0, not a numeric string), so a
bad row is an error naming ``PATH:N`` and the field at launch, not a TypeError when the prompt is drawn; a synthetic frame (``image`` unset) is a seeded flat background
with three coloured rectangles, so rollouts have some structure to move. A 16-bit greyscale image (PNG or
TIFF, PIL mode I;16 / I) is rescaled to 8 bits (PIL's convert("RGB") clipped it: a full gradient came out
almost all white); a floating-point one (mode F) is refused by name, since its range (0..1, 0..255, HDR)
cannot be known from the file, and a guessed brightness would change what the policy is conditioned on.
For the same reason a 32-bit integer image (mode I from a TIFF of 32-bit or signed samples, or any format
but PNG and PGM/PPM) is refused: it may hold 0..255, 0..4095 or 0..65535 (read as 0..65535, a 0..255 one
came out almost black); mode I is read as 0..65535 only from PNG and PGM/PPM (`SIXTEEN_BIT_FORMATS`).
An image whose EXIF block cannot be parsed (a PNG eXIf chunk that is not TIFF data) is refused by name for
the same reason: its orientation is unknown (Pillow raised a bare SyntaxError, "not a TIFF file", that named
no file; a JPEG's broken EXIF Pillow itself reads as no tag, with a warning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from tools.file_kinds import read_at
from tools.jsonl import json_lines
from training.config import PromptSpec
from training.prompt_checks import blank_file_problem, is_blank_file


def load_prompts(dataset: Sequence[PromptSpec], dataset_file: str | None,
                 kind: Literal["training", "held-out"] = "training") -> list[PromptSpec]:
    """Prompts of the config plus those of a JSONL file (image paths relative to that file); ValueError
    naming the file (and line) for a malformed row or when there is no prompt at all (``kind``: which
    prompts the error names, the training or the held-out ones)."""
    return load_placed_prompts(dataset, dataset_file, kind)[0]


def load_placed_prompts(dataset: Sequence[PromptSpec], dataset_file: str | None,
                        kind: Literal["training", "held-out"] = "training") -> tuple[list[PromptSpec], list[str]]:
    """`load_prompts` and, per prompt, where it was given: ``dataset[i]`` (``eval_dataset[i]``) for a config
    prompt, ``PATH:N`` for line N of the prompt file, so a prompt image that fails later (it went missing
    during the run) is named by the line to fix. Kept beside the prompts, not in `PromptSpec`, whose fields
    are the prompts' digest (training/prompt_stamp.py, the held-out ``eval_key``)."""
    prompts = list(dataset)
    places = [f"{'eval_dataset' if kind == 'held-out' else 'dataset'}[{i}]" for i in range(len(prompts))]
    if is_blank_file(dataset_file):  # as validation says: not a path to "." (not unset either)
        raise ValueError(blank_file_problem("eval_dataset_file" if kind == "held-out" else "dataset_file"))
    if dataset_file is not None:
        path = Path(dataset_file)
        found, data = read_at(path)  # one look: a file gone after an is_file raised the read's bare FileNotFoundError
        if found is not None:
            raise FileNotFoundError(f"prompt file not found: {path}")
        for where, row in json_lines(path, ValueError, data=data):
            prompts.append(prompt_from_row(row, where, path.parent))
            places.append(where)
        if not prompts:
            raise ValueError(f"no {kind} prompts: {path} holds no prompt rows (it is empty or blank) and the "
                             "config lists none")
    if not prompts:
        raise ValueError(f"no {kind} prompts: the config lists none and names no prompt file")
    return prompts, places


def prompt_from_row(row: object, where: str, folder: Path) -> PromptSpec:
    """The PromptSpec of one JSONL row (`where` = "PATH:N"; a relative image path is taken from `folder`).
    ValueError naming the place and the field for a row that is not {"text": non-empty str, "image": str or
    null, "image_seed": int >= 0}: a number where a path or text belongs failed only when the prompt was drawn,
    as a bare TypeError."""
    if not isinstance(row, dict) or "text" not in row:
        raise ValueError(f"{where}: a prompt needs 'text'")
    text, image, seed = row["text"], row.get("image"), row.get("image_seed", 0)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where}: 'text' must be a non-empty string, got {text!r}")
    if image is not None and (not isinstance(image, str) or not image):
        raise ValueError(f"{where}: 'image' must be a file path (a non-empty string) or null, got {image!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{where}: 'image_seed' must be an integer, got {seed!r}")
    if seed < 0:  # numpy refused it when the prompt was drawn, a bare ValueError mid-run
        raise ValueError(f"{where}: 'image_seed' must be >= 0, got {seed}")
    if image is not None and not Path(image).is_absolute():
        image = str(folder / image)
    meta = {k: v for k, v in row.items() if k not in ("text", "image", "image_seed")}
    return PromptSpec(text=text, image=image, image_seed=seed, meta=meta)


def derive_seed(*parts: int) -> int:
    """A 32-bit seed that is a pure function of integer `parts` (e.g. run seed, iteration, rank, slot),
    for the generators of rollout noise and sampling (numpy SeedSequence: well mixed, so neighbouring
    tuples of one length give unrelated seeds).

    The tuples of one purpose have a fixed length (rollouts: seed, iteration, rank, slot; a rollout chunk
    adds its index; the update order: seed, iteration, epoch; sampled videos: `sample_seed`).
    SeedSequence drops trailing zero parts, so tuples of different lengths that differ only by trailing
    zeros are the same seed: ``derive_seed(s, i) == derive_seed(s, i, 0)`` (chunk 0 of a chunked group
    draws from its whole group's seed), and ``derive_seed(0) == derive_seed()``. The seeds are kept as they
    are: runs and resumes rely on drawing the noise they always drew (tests/test_rollout_chunks.py)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0])


PROMPT_STREAM = 0x70726D74
"""Second part of the prompt order's tuples ("prmt" in ASCII): far above any iteration number, and not
`SAMPLE_STREAM`, so an epoch's order never shares a seed with rollout noise, the update order or sampled videos."""
PromptOrder = Literal["derived", "seed_plus_epoch"]

SAMPLE_STREAM = 0x73616D70
"""Second part of `sample_seed`'s tuples ("samp" in ASCII): far above any iteration number, so they never equal a
rollout's (seed, iteration, rank, slot[, chunk]) or the update order's (seed, iteration, epoch)."""
SAMPLE_NOISE = "sample_seed/stream"
"""Names `sample_seed`'s derivation where settings record it (``eval_key``, generate.json): rows and videos of
the derivation before it (``derive_seed(seed, prompt, sample)``) are not compared or mixed with its own."""


def sample_seed(seed: int, prompt: int, sample: int) -> int:
    """The noise seed of sample ``sample`` of prompt ``prompt`` drawn outside training: the held-out evaluation's
    items (training/evaluate.py) and training.generate's videos, so ``generate --seed SEED`` on the held-out
    prompts reproduces an evaluation. ``derive_seed(seed, SAMPLE_STREAM, prompt, sample)``, a stream of its own:
    it was ``derive_seed(seed, prompt, sample)``, which (trailing zeros dropped) is the seed of the rollouts of
    prompt slot 0 on rank ``sample`` in iteration ``prompt``, so held-out item (p, s) started from the noise a
    training rollout had started from."""
    return derive_seed(seed, SAMPLE_STREAM, prompt, sample)


def synthetic_frame(seed: int, height: int, width: int) -> np.ndarray:
    """A seeded RGB frame uint8 [H, W, 3]: flat background and three rectangles."""
    rng = np.random.default_rng(seed)
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = rng.integers(40, 200, size=3, dtype=np.uint8)
    for _ in range(3):
        h = int(rng.integers(max(1, height // 8), max(2, height // 2)))
        w = int(rng.integers(max(1, width // 8), max(2, width // 2)))
        y = int(rng.integers(0, height - h + 1))
        x = int(rng.integers(0, width - w + 1))
        frame[y:y + h, x:x + w] = rng.integers(0, 256, size=3, dtype=np.uint8)
    return frame


def load_frame(spec: PromptSpec, height: int, width: int, fit: Literal["crop", "stretch"] = "crop") -> np.ndarray:
    """The prompt's initial frame as uint8 [H, W, 3] at the run's size (upright, fitted by `fit`)."""
    if spec.image is None:
        return synthetic_frame(spec.image_seed, height, width)
    from PIL import Image, ImageOps

    path = Path(spec.image)
    if not path.is_file():
        raise FileNotFoundError(f"prompt image not found: {path}")
    with Image.open(path) as img:
        rgb = frame_rgb(img, path)
        if fit == "crop":
            rgb = ImageOps.fit(rgb, (width, height), Image.Resampling.BILINEAR, centering=(0.5, 0.5))
        elif fit == "stretch":
            rgb = rgb.resize((width, height), Image.Resampling.BILINEAR)
        else:
            raise ValueError(f"image fit must be 'crop' or 'stretch', got {fit!r}")
        return np.asarray(rgb, dtype=np.uint8).copy()


def upright(img, path: Path):
    """`img` (a PIL image) turned upright by its EXIF orientation tag; ValueError naming the file when its EXIF
    block cannot be parsed (Pillow raises SyntaxError, or struct.error on a short block), as the orientation
    is then unknown."""
    import struct

    from PIL import ImageOps

    try:
        return ImageOps.exif_transpose(img)
    except (SyntaxError, struct.error) as exc:
        raise ValueError(f"prompt image {path}: its EXIF metadata cannot be read ({type(exc).__name__}: {exc}), so "
                         "its orientation is unknown: save it again without EXIF (or with valid EXIF)") from None


WIDE_INTEGER_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
"""Pillow modes of greyscale images with more than 8 bits per pixel (16-bit PNG and TIFF open as "I;16",
some readers give "I"); `rgb8` reads them as 0..65535."""

SIXTEEN_BIT_FORMATS = ("PNG", "PPM")
"""Pillow formats whose mode "I" images hold 16-bit samples, 0..65535: PNG stores at most 16 bits (older
Pillow opened 16-bit greyscale as "I"), and Pillow scales a PGM's maxval to 0..65535. Mode "I" from any other
file (a TIFF of 32-bit or signed samples) has no known range and is refused (`frame_rgb`)."""


def frame_rgb(img, path: Path):
    """`img` (a PIL image just opened from `path`) as 8-bit RGB, upright, as `load_frame` conditions on it;
    ValueError naming the file for a mode "I" image not from `SIXTEEN_BIT_FORMATS` (checked before `upright`,
    whose copy no longer knows its file format), and for what `upright` and `rgb8` refuse."""
    if img.mode == "I" and img.format not in SIXTEEN_BIT_FORMATS:
        raise ValueError(f"prompt image {path} is a 32-bit or signed integer image (PIL mode I from a {img.format} "
                         "file), whose brightness range is not defined (0..255, 0..4095, 0..65535 ...): save it as "
                         "an 8-bit or 16-bit unsigned RGB or greyscale image")
    return rgb8(upright(img, path), path)


def rgb8(img, path: Path):
    """`img` (a PIL image; mode "I" only from `SIXTEEN_BIT_FORMATS`: `frame_rgb`) as 8-bit RGB. Greyscale of a
    wide integer mode (`WIDE_INTEGER_MODES`) is rescaled from 0..65535 to 0..255 (PIL's own convert clips it at
    255: a 16-bit frame came out almost all white);
    a value outside 0..65535 or a floating-point image ("F": no agreed range, 0..1 or 0..255 or HDR) is a
    ValueError naming the file and the mode rather than a guessed brightness. Other modes convert as PIL
    does (16-bit RGB PNGs already open as 8-bit "RGB")."""
    from PIL import Image

    if img.mode == "F":
        raise ValueError(f"prompt image {path} is a floating-point image (PIL mode F), whose brightness range is "
                         "not defined: save it as an 8-bit (or 16-bit) RGB or greyscale image")
    if img.mode not in WIDE_INTEGER_MODES:
        return img.convert("RGB")
    values = np.asarray(img).astype(np.int64)
    lo, hi = int(values.min()), int(values.max())
    if lo < 0 or hi > 65535:
        raise ValueError(f"prompt image {path} (PIL mode {img.mode}) holds values {lo}..{hi}, outside the 16-bit "
                         "range 0..65535 it is read in: save it as an 8-bit or 16-bit image")
    grey = (values * 255 + 32767) // 65535  # rounded to the nearest 8-bit level
    return Image.fromarray(grey.astype(np.uint8)).convert("RGB")


def check_images(prompts: Sequence[PromptSpec], limit: int = 5, places: Sequence[str] | None = None) -> list[str]:
    """Problems with the prompts' initial frames (missing file, not an image, a truncated or corrupt file, a
    pixel format `rgb8` refuses), at most `limit` named: each image is decoded as `load_frame` decodes it (its
    pixels, not only its header: a truncated PNG or JPEG has a valid header), so a run learns of a bad file at
    start, not at the rollout that needs it. With ``places`` (`load_placed_prompts`), each problem starts with
    its prompt's place (``PATH:N``: the line to fix)."""
    from PIL import Image, UnidentifiedImageError

    problems: list[str] = []
    for n, spec in enumerate(prompts):
        if spec.image is None or len(problems) >= limit:
            continue
        path = Path(spec.image)
        where = f"{places[n]}: " if places is not None else ""
        if not path.is_file():
            problems.append(f"{where}prompt image not found: {path}")
            continue
        try:
            with Image.open(path) as img:
                frame_rgb(img, path)  # the pixels, as load_frame reads them
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
            problems.append(f"{where}prompt image {path} cannot be read ({type(exc).__name__}: {exc})")
        except ValueError as exc:
            problems.append(f"{where}{exc}")
    return problems


@dataclass
class PromptStream:
    """Seeded, resumable order over prompts; ``position`` = prompts consumed over all ranks."""

    num_prompts: int
    """Number of distinct prompts."""
    seed: int
    """Seed of the per-epoch permutations."""
    position: int = 0
    """Prompts consumed so far (saved in checkpoints)."""
    order: PromptOrder = "derived"
    """How an epoch's permutation is seeded (module docstring; TrainConfig.prompt_order)."""

    def permutation(self, epoch: int) -> np.ndarray:
        """The prompt order of ``epoch``: a permutation of the prompt indices (module docstring)."""
        if self.order == "derived":
            seed = derive_seed(self.seed, PROMPT_STREAM, epoch)
        elif self.order == "seed_plus_epoch":
            seed = self.seed + epoch
        else:
            raise ValueError(f"prompt order must be 'derived' or 'seed_plus_epoch', got {self.order!r}")
        return np.random.default_rng(seed).permutation(self.num_prompts)

    def index_at(self, pos: int) -> int:
        epoch, offset = divmod(pos, self.num_prompts)
        return int(self.permutation(epoch)[offset])

    def take(self, count: int) -> list[int]:
        """The next ``count`` prompt indices (global order); advances ``position``. Each epoch's permutation is
        drawn once per call (per prompt, 64 prompts of a million-prompt file took ~2.4 s on every rank)."""
        out: list[int] = []
        pos, end = self.position, self.position + count
        while pos < end:
            epoch, offset = divmod(pos, self.num_prompts)
            part = self.permutation(epoch)[offset:offset + end - pos]
            out += [int(i) for i in part]
            pos += len(part)
        self.position = end
        return out
