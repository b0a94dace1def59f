"""Bound on the RGB frames one decode request of ``tools.video.VideoReader`` returns (the array it allocates for them;
the decoder's own buffers, a few frames at the stream's size per decoder thread, come on top and are not counted).

Decisions where the issue was silent:

- ``read`` / ``read_list`` (and ``read_frames`` / ``read_all_frames`` over them) check, before anything is
  allocated or decoded, that the RGB output (frames x width x height x 3 bytes, at the requested ``size``
  when one is given) takes at most ``DECODE_LIMIT_BYTES``; a larger request is a ``VideoTooLargeError``
  (a ``VideoError``) naming the clip, its frame size and the bytes asked for. Before this, ``read``'s one
  ``np.empty`` of a huge request raised a bare ``MemoryError`` (or, with overcommit, the process was
  OOM-killed while the frames were filled in), and the reward agent's quality step, which decodes its
  32-frame sample at full size, ran out of memory on a 16K clip.
- The default, 4 GiB, passes the agent's 32-frame sample of an 8K clip (7680x4320: 3.2 GB) and refuses a 16K
  one (15360x8640: 12.7 GB); the agent turns the error into its usual ineligible result with the reason
  (``graph.nodes.common.to_fault``: a ``video`` fault). The full-size sample stays: observe's crops and the
  quality statistics work on full-size frames, and a downscaled sample would change them for every clip.
  Consumers that already decode downscaled (``FrameStore.scaled_frames``: surprise scorer, tracker) stay
  far below the bound.
- A reader takes its own bound (``VideoReader(src, decode_limit=...)``); ``None`` uses the module's default,
  read at each request (tests lower it with ``monkeypatch``). A `DecodeLimit` bound carries the name of the setting
  that sets it (the tool service's ``max_decode_mb``), which the error names.
- A clip over the limit is the clip's own fault, whichever reader refused it (in-process, or the tool service's,
  whose 413 carries the error for the client to raise again: tools/service_frames.py): a video fault, final while the
  clip is unchanged, as for a clip that does not decode. The limit is a setting, but a clip that is simply huge never
  passes it, and every clip of a run is refused or not by its own frame size; as the service's "setup limit" (an
  outage) it was scored again by every ``--retry-ineligible`` and counted as the machinery's failure. The error names
  the setting and the size at which it would admit the clip (`decoded_sizes`: both sizes to 3 significant digits,
  the need rounded up so that the size it names admits the clip, more digits where the two would read alike; the
  service's 413 said "0.0 MiB, over the limit of 0.0234375 MiB"), and that the bytes are the RGB frames': "would take
  N MiB decoded" read as the decode's whole memory, which a limit set to the memory a user could spare then exceeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tools.video_errors import VideoTooLargeError

DECODE_LIMIT_BYTES = 4 * 2**30
DEFAULT_SETTING = "tools.video_limits.DECODE_LIMIT_BYTES"
"""What sets the in-process readers' default limit, as the error names it."""


@dataclass(frozen=True)
class DecodeLimit:
    """A decode limit of ``bytes`` and the ``setting`` that sets it (named in the error)."""

    bytes: int
    setting: str


def _mib(n_bytes: int, digits: int, *, up: bool) -> str:
    """``n_bytes`` in MiB to ``digits`` significant digits (whole MiB at least), rounded up (``up``) or to the nearest,
    without trailing zeros; exact integer arithmetic."""
    mib = n_bytes / 2**20
    decimals = max(0, digits - 1 - math.floor(math.log10(mib))) if mib > 0 else 0
    scale = 10**decimals
    units = -(-n_bytes * scale // 2**20) if up else (2 * n_bytes * scale + 2**20) // 2**21
    if not decimals:
        return str(units)
    return f"{units // scale}.{units % scale:0{decimals}d}".rstrip("0").rstrip(".")


def decoded_sizes(need: int, bound: int) -> tuple[str, str]:
    """``need`` over ``bound`` (bytes) as MiB texts worded alike (module docstring): 3 significant digits, more where
    they would read the same; ``need`` rounded up, so that a limit of that size admits it."""
    for digits in range(3, 16):
        shown = _mib(need, digits, up=True), _mib(bound, digits, up=False)
        if shown[0] != shown[1]:
            break
    return shown


def check_decode_size(name: str, count: int, size: tuple[int, int], limit: int | DecodeLimit | None = None) -> None:
    """Raise ``VideoTooLargeError`` when ``count`` RGB frames of ``size`` (width, height) exceed ``limit``
    bytes (``DECODE_LIMIT_BYTES`` when None), naming what sets the limit and the size that would admit them."""
    if isinstance(limit, DecodeLimit):
        bound, setting = limit.bytes, limit.setting
    else:
        bound, setting = (DECODE_LIMIT_BYTES, DEFAULT_SETTING) if limit is None else (limit, "the reader's decode_limit")
    width, height = size
    need = count * width * height * 3
    if need > bound:
        shown_need, shown_bound = decoded_sizes(need, bound)
        raise VideoTooLargeError(
            f"{name}: {count} frame(s) of {width}x{height} would take {shown_need} MiB as RGB frames, over the decode "
            f"limit of {shown_bound} MiB ({setting}), which counts those frames, not the decoder's own buffers; a limit "
            f"of at least {shown_need} MiB would admit it")
