"""Which HDR transfer a video stream declares (``VideoMeta.hdr``; decisions of ``tools.video``).

The reader converts every frame to 8-bit RGB with swscale, which applies the YUV matrix but no transfer function: a
PQ (SMPTE ST 2084) or HLG (ARIB STD-B67) clip's code values are shown as if they were SDR gamma ones, with its BT.2020
primaries read as BT.709. Such frames look dim, flat and desaturated (a scene at SDR brightness, white at 203 nits,
fills about 50..150 of 0..255 in PQ), and the reward agent judged them as the clip's true look. This FFmpeg has no
``zscale`` to linearize them for its ``tonemap`` filter, and a tone-mapping curve of the reader's own would change what
every quality statistic sees on such clips, a choice with no agreed answer; so frames stay as decoded, the reader
names the transfer, and the agent's run carries a note (``graph.nodes.quality``).
"""

from __future__ import annotations

HDR_TRANSFERS = {16: "PQ", 18: "HLG"}
"""FFmpeg's ``AVColorTransferCharacteristic`` values of the HDR transfers: SMPTE ST 2084 (PQ), ARIB STD-B67 (HLG)."""


def hdr_transfer(color_trc: int | None) -> str | None:
    """"PQ" or "HLG" for a stream whose transfer characteristic (``codec_context.color_trc``) is that HDR transfer;
    None for SDR or unspecified."""
    return HDR_TRANSFERS.get(int(color_trc or 0))


def hdr_note(hdr: str | None) -> str | None:
    """The run's note for a clip of HDR transfer ``hdr`` (None for SDR)."""
    if hdr is None:
        return None
    return (f"quality: the clip is HDR ({hdr}); its frames are judged as decoded, without tone mapping, so they look "
            "dimmer, flatter and less saturated than the clip does on an HDR display")
