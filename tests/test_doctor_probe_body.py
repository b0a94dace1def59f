"""`raa doctor --call`: the image request's body is a real request's size. It sent 48 flat red frames, whose
JPEGs are ~15x smaller than real frames' (0.29 MiB at 512 px, quality 85), so a reverse proxy at nginx's
default 1 MiB `client_max_body_size` passed the doctor ("ok") and answered every real run with a 413."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from graph.config import AgentConfig
from graph.doctor import run_checks
from graph.settings import BackboneSettings
from tests.openai_stub import OpenAIStub, StubReply, json_reply, tool_reply
from tools.frames import image_content_blocks
from tools.settings import ToolSettings

IMAGES = "48 images + structured output"
NGINX_DEFAULT = 2**20  # client_max_body_size 1m


def _settings(url: str, tmp_path, **kw) -> BackboneSettings:
    return BackboneSettings(base_url=url, model="stub-model", api_key="EMPTY", max_retries=0, schema_retries=0,
                            timeout_s=10, traces_path=str(tmp_path / "traces.sqlite"),
                            cache_path=str(tmp_path / "cache.sqlite"), **kw)


def _natural_frames(n: int, height: int, width: int) -> np.ndarray:
    """Seeded stand-ins for real video frames: each channel has natural images' ~1/f^1.3 amplitude spectrum
    (smoother than the doctor's own texture), over a mid-grey; landscape, as most clips are."""
    rng = np.random.default_rng(7)
    f = np.hypot(np.fft.fftfreq(height)[:, None], np.fft.rfftfreq(width)[None, :])
    f[0, 0] = 1.0
    frames = []
    for _ in range(n):
        chans = []
        for _ in range(3):
            spec = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f**1.3
            spec[0, 0] = 0.0
            c = np.fft.irfft2(spec, s=(height, width))
            chans.append(128 + 45 * c / c.std())
        frames.append(np.clip(np.stack(chans, -1), 0, 255).astype(np.uint8))
    return np.stack(frames)


def _real_body_bytes(settings: BackboneSettings, n: int) -> int:
    """The image part of the agent's largest request at `settings` (tools.frames.image_content_blocks, as the
    agent encodes frames): 720p frames cut to the long side and quality, as JSON."""
    frames = _natural_frames(4, 720, 1280)
    blocks = image_content_blocks(frames[np.arange(n) % 4], list(range(n)), n, 8.0,
                                  long_side=settings.image_long_side, quality=settings.jpeg_quality)
    return len(json.dumps(blocks))


@pytest.mark.parametrize("kw", [{}, {"image_long_side": 384, "jpeg_quality": 70}], ids=["defaults", "384-q70"])
def test_the_image_request_is_about_as_large_as_a_real_one(tmp_path, kw):
    with OpenAIStub([json_reply({"colour": "red"}), tool_reply("view_frames", {"frames": [0]})],
                    models=["stub-model"]) as stub:
        settings = _settings(stub.base_url, tmp_path, **kw)
        checks = {c.name: c for c in asyncio.run(run_checks(settings, ToolSettings(), call=True, wait_s=2))}
    assert checks[IMAGES].status == "ok", checks[IMAGES]
    sent = len(json.dumps(stub.requests[0]))
    real = _real_body_bytes(settings, AgentConfig().max_images_per_call)
    assert 0.5 < sent / real < 2, (sent, real)


def test_a_proxy_at_nginx_s_default_body_limit_is_a_problem_not_ok(tmp_path):
    """A proxy that answers a body over 1 MiB with a 413, as nginx does by default: the first real run's
    request is over it, so the doctor's is too, and the check names the limit."""
    def proxy(body: dict) -> StubReply:
        if len(json.dumps(body)) > NGINX_DEFAULT:
            return StubReply(status=413, body="<html><title>413 Request Entity Too Large</title></html>",
                             content_type="text/html")
        return tool_reply("view_frames", {"frames": [0]}) if body.get("tools") and not body.get("tool_choice") \
            else json_reply({"colour": "red"})

    with OpenAIStub(responder=proxy, models=["stub-model"]) as stub:
        settings = _settings(stub.base_url, tmp_path)
        checks = {c.name: c for c in asyncio.run(run_checks(settings, ToolSettings(), call=True, wait_s=2))}
    assert _real_body_bytes(settings, AgentConfig().max_images_per_call) > NGINX_DEFAULT  # a real run gets the 413
    check = checks[IMAGES]
    assert check.status == "problem" and "client_max_body_size" in check.detail, check
