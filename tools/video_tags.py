"""Each packet fed to a read's decoder tagged with its place in decode order and the decode it is fed in, which its
frame gives back (``Flags.copy_opaque``, set by ``tools.video_threads.watched_decoder``): how a
``tools.video_damage.DamageWatch`` places a frame."""

from __future__ import annotations

import av


def tag_packet(packet: av.Packet, index: int, carried: int = 0, *, decode: object) -> None:
    """Tag ``packet`` with its ``index`` in decode order, which its frame gives back (``frame_tag``) where the decoder
    copies it (``Flags.copy_opaque``); ``carried``: the packets of no picture before it whose data heads it
    (``tools.video_slices.fed_with_pictures``), tagged the indices before, which its frame brings out too;
    ``decode``: the decode it is fed in (``earlier_decode``). A new
    object for each: PyAV keeps an opaque value under its id() and forgets it when any packet or frame holding it is
    freed, so a shared one (a cached small int) in two decodes at once was lost to the one that freed it first."""
    packet.opaque = (index, carried, decode)


DISCARDED = -1
"""The tag of a packet the demuxer marked discard (an edit list's cut): the decoder decodes it for the frames after it
and FFmpeg drops its frame, flag and all, but not one of a packet made for the decoder
(``tools.video_slices.fed_with_pictures``), which cannot take the flag: the reader feeds each one so (``tag_discarded``)
and drops its frame itself, once the watch saw its flag (``DamageWatch.discarded``)."""


def tag_discarded(packet: av.Packet, at: int, *, decode: object) -> None:
    """Tag ``packet`` ``DISCARDED``, fed after the packets tagged below ``at`` in ``decode``."""
    packet.opaque = (DISCARDED, 0, at, decode)


def earlier_decode(frame: av.VideoFrame, decode: object) -> bool:
    """Whether ``frame``'s packet was tagged in another decode than ``decode`` (``tag_packet``): with frame threads
    FFmpeg's HEVC decoder put a frame fed before a seek out after it (the seek's flush kept it: frame 46, a leading
    picture of keyframe 48, after the seek to 48), under its tag of that decode, another packet's number in this one."""
    value = frame.opaque
    return isinstance(value, tuple) and value[-1] is not decode


def frame_tag(frame: av.VideoFrame) -> int | None:
    """The tag ``tag_packet`` gave the packet of ``frame`` (None: not tagged)."""
    value = frame.opaque
    return value[0] if isinstance(value, tuple) else None


def carried(frame: av.VideoFrame) -> int:
    """The packets of no picture the packet of ``frame`` carried (``tag_packet``): out with it."""
    value = frame.opaque
    return value[1] if isinstance(value, tuple) and len(value) > 1 else 0

