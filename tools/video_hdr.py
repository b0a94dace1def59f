"""Which HDR transfer a video stream declares (``VideoReader.hdr``; decisions of ``tools.video``).

The reader converts every frame to 8-bit RGB with swscale, which converts YUV to RGB but maps neither the transfer
function nor the gamut: a PQ (SMPTE ST 2084) or HLG (ARIB STD-B67) clip's code values are shown as if they were SDR
gamma ones, with its BT.2020 primaries read as BT.709. Such frames look dim, flat and desaturated (a scene at SDR brightness, white at 203 nits,
fills about 50..150 of 0..255 in PQ), and the reward agent judged them as the clip's true look. This FFmpeg has no
``zscale`` to linearize them for its ``tonemap`` filter, and a tone-mapping curve of the reader's own would change what
every quality statistic sees on such clips, a choice with no agreed answer; so frames stay as decoded, the reader
names the transfer, and the agent's run carries a note (``graph.nodes.quality``).

Where the transfer is read: the scan decodes nothing, so it takes the transfer from the headers (MP4, Matroska, an AV1
sequence header: `stated_hdr`). An MPEG-TS or raw H.264 / HEVC stream states it only in its bitstream (the SPS), and
so does an H.264 MP4 opened without FFmpeg's probe decode: for those the transfer is that of the first frame a read of
the reader decodes, any profile (10-bit, High 4:2:2, HEVC range extensions, 8-bit), at no cost; only when ``hdr()`` is
asked before any read does the reader decode the first keyframe for it (`keyframe_hdr`: once, within the decode
limit). Decoding that keyframe in the scan cost every reader (every request of the tool service, which never needs
the transfer) 0.2 s for a 1080p HEVC TS clip and 1-2 s at 4K, against 15-35 ms for the scan.
"""

from __future__ import annotations

from collections.abc import Iterable

import av

from tools.video_slices import fed_with_pictures, joined

HDR_TRANSFERS = {16: "PQ", 18: "HLG"}
"""FFmpeg's ``AVColorTransferCharacteristic`` values of the HDR transfers: SMPTE ST 2084 (PQ), ARIB STD-B67 (HLG)."""

UNSTATED_TRANSFERS = (0, 2)
"""``color_trc`` values that state nothing: reserved, unspecified."""


def hdr_transfer(color_trc: int | None) -> str | None:
    """"PQ" or "HLG" for a stream or frame whose transfer characteristic (``color_trc``) is that HDR transfer;
    None for SDR or unspecified."""
    return HDR_TRANSFERS.get(int(color_trc or 0))


def stated_hdr(ctx: av.VideoCodecContext) -> tuple[bool, str | None]:
    """(whether the headers settle it, `hdr_transfer`) of a stream's codec context as the scan leaves it (no frame
    decoded): settled when they state a transfer, or a pixel format (FFmpeg's parsers set both from the same
    sequence header, so a stream whose headers have a pixel format and no transfer states none)."""
    stated = int(ctx.color_trc or 0) not in UNSTATED_TRANSFERS or ctx.pix_fmt is not None
    return stated, hdr_transfer(ctx.color_trc)


def keyframe_hdr(stream: av.video.stream.VideoStream, packets: Iterable[av.Packet], *, annex_b: bool = False) -> str | None:
    """`hdr_transfer` of the first keyframe among ``packets`` (of ``stream``, on a fresh demuxer), decoded alone with
    slice threads (frame threads would decode the next frames with it) and the decoder flushed after it, so that
    neither the threads nor a reorder delay decode more; None when no keyframe comes or it does not decode alone (no
    note, never a fault: the clip's own reads judge its decoding). The demuxer's errors propagate (the caller's
    ``wrapped``). A packet of no picture (a leading sample of the parameter sets alone, flagged a keyframe) is fed at
    the head of the next one, as the reads feed it (`fed_with_pictures`): decoded alone it gave no frame, and None for
    an HDR clip whose header holds no parameter sets. A keyframe marked discard (an edit list's cut: a start-trimmed
    clip's) is decoded from a copy without the mark: FFmpeg drops a discarded packet's frame, and that gave None.
    ``annex_b``: the file's samples are framed by start codes behind its avcC record (``FrameIndex.annex_b``)."""
    stream.thread_type = "SLICE"
    ctx = stream.codec_context
    for packet, _, discard in fed_with_pictures(packets, ctx.name, None if annex_b else ctx.extradata):
        if packet.size and packet.is_keyframe:
            packet = joined(b"", packet) if discard else packet
            try:
                frames = [*stream.decode(packet), *stream.decode(None)]
            except av.error.FFmpegError:
                return None
            return hdr_transfer(frames[0].color_trc) if frames else None
    return None


def hdr_note(hdr: str | None) -> str | None:
    """The run's note for a clip of HDR transfer ``hdr`` (None for SDR)."""
    if hdr is None:
        return None
    return (f"quality: the clip is HDR ({hdr}); its frames are judged as decoded, without tone mapping, so they look "
            "dimmer, flatter and less saturated than the clip does on an HDR display")
