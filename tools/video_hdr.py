"""Which HDR transfer a video stream declares (``VideoMeta.hdr``; decisions of ``tools.video``).

The reader converts every frame to 8-bit RGB with swscale, which converts YUV to RGB but maps neither the transfer
function nor the gamut: a PQ (SMPTE ST 2084) or HLG (ARIB STD-B67) clip's code values are shown as if they were SDR
gamma ones, with its BT.2020 primaries read as BT.709. Such frames look dim, flat and desaturated (a scene at SDR brightness, white at 203 nits,
fills about 50..150 of 0..255 in PQ), and the reward agent judged them as the clip's true look. This FFmpeg has no
``zscale`` to linearize them for its ``tonemap`` filter, and a tone-mapping curve of the reader's own would change what
every quality statistic sees on such clips, a choice with no agreed answer; so frames stay as decoded, the reader
names the transfer, and the agent's run carries a note (``graph.nodes.quality``).
"""

from __future__ import annotations

import av

HDR_TRANSFERS = {16: "PQ", 18: "HLG"}
"""FFmpeg's ``AVColorTransferCharacteristic`` values of the HDR transfers: SMPTE ST 2084 (PQ), ARIB STD-B67 (HLG)."""


def hdr_transfer(color_trc: int | None) -> str | None:
    """"PQ" or "HLG" for a stream whose transfer characteristic (``codec_context.color_trc``) is that HDR transfer;
    None for SDR or unspecified."""
    return HDR_TRANSFERS.get(int(color_trc or 0))


DEEP_PROFILES = ("High 10", "Main 10", "Main 12", "Profile 2", "Profile 3")
"""Profile names (H.264, HEVC, VP9) of more than 8 bits a sample, where HDR lives: a stream of one whose headers state
no transfer is decoded for it (`stream_hdr`). Not AV1, whose profiles do not tell the depth."""


def stream_hdr(stream: av.video.stream.VideoStream, key_packet: av.Packet | None) -> str | None:
    """`hdr_transfer` of ``stream``: from its headers (MP4, Matroska), or, for a stream of a `DEEP_PROFILES` profile
    whose headers give no pixel format either (an MPEG-TS or raw stream states both only in its bitstream), from its
    first keyframe ``key_packet`` decoded alone: one frame, for those streams only (the scan decodes nothing else: an
    8-bit H.264 MP4 opened without FFmpeg's probe decode has no pixel format either). A packet that does not decode
    alone gives None: no note, never a fault."""
    ctx = stream.codec_context
    found = hdr_transfer(ctx.color_trc)
    if found is not None or ctx.pix_fmt is not None or key_packet is None or not any(
            p in (ctx.profile or "") for p in DEEP_PROFILES):
        return found
    try:
        decoder = av.CodecContext.create(ctx.name, "r")
        if not isinstance(decoder, av.VideoCodecContext):  # a video stream's codec: always, for PyAV's types
            return None
        if ctx.extradata:
            decoder.extradata = ctx.extradata
        frames = [*decoder.decode(key_packet), *decoder.decode(None)]
    except (av.error.FFmpegError, ValueError):
        return None
    return hdr_transfer(frames[0].color_trc) if frames else None


def hdr_note(hdr: str | None) -> str | None:
    """The run's note for a clip of HDR transfer ``hdr`` (None for SDR)."""
    if hdr is None:
        return None
    return (f"quality: the clip is HDR ({hdr}); its frames are judged as decoded, without tone mapping, so they look "
            "dimmer, flatter and less saturated than the clip does on an HDR display")
