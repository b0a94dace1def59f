"""Bound on the memory one decode request of ``tools.video.VideoReader`` may allocate.

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
  read at each request (tests lower it with ``monkeypatch``).
"""

from __future__ import annotations

from tools.video_errors import VideoTooLargeError

DECODE_LIMIT_BYTES = 4 * 2**30


def check_decode_size(name: str, count: int, size: tuple[int, int], limit: int | None = None) -> None:
    """Raise ``VideoTooLargeError`` when ``count`` RGB frames of ``size`` (width, height) exceed ``limit``
    bytes (``DECODE_LIMIT_BYTES`` when None)."""
    bound = DECODE_LIMIT_BYTES if limit is None else limit
    width, height = size
    need = count * width * height * 3
    if need > bound:
        raise VideoTooLargeError(
            f"{name}: {count} frame(s) of {width}x{height} would take {need / 2**20:.0f} MiB decoded, "
            f"over the decode limit of {bound / 2**20:.0f} MiB (tools.video_limits)")
