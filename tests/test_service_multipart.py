"""Multipart uploads to the tool service (tools/service_multipart.py): parsed off the event loop, held once."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from tools.motion import LKTracker
from tools.service import create_app
from tools.settings import ToolSettings


def test_healthz_answers_while_a_multipart_upload_is_parsed(service_root, monkeypatch):
    """A multipart body was parsed on the event loop (~0.76 s for 200 MB), during which no other request, /healthz
    included, was answered. The parse is held up here until /healthz answers (or 10 s pass)."""
    import python_multipart.multipart as pm

    clip = (service_root / "clip.mp4").read_bytes()
    write, answered = pm.MultipartParser.write, []

    def parse_while_healthz_asked(self, data):  # noqa: ANN001, ANN202 (python-multipart's signature)
        if not answered:
            probe = threading.Thread(target=lambda: answered.append(c.get("/healthz").status_code))
            probe.start()
            probe.join(timeout=10)  # the event loop must answer it while this parse is running
            answered.append("during parse" if answered else "not during parse")
        return write(self, data)

    monkeypatch.setattr(pm.MultipartParser, "write", parse_while_healthz_asked)
    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    with TestClient(app) as c:
        r = c.post("/v1/track", files={"video": ("c.mp4", clip)}, data={"grid_size": "2", "frame_indices": "[0, 1]"})
        assert r.status_code == 200, r.text
        assert len(r.json()["tracks"]["tracks"]) == 2
    assert answered[:2] == [200, "during parse"], answered


def test_the_raw_body_is_dropped_before_the_upload_is_read_back(monkeypatch):
    """The raw multipart body was kept while the upload was read back from the parser's spooled file: a 200 MB
    upload was held twice. The body is dropped once fed to the parser, before the upload is read."""
    import anyio
    from starlette.datastructures import UploadFile

    from tools.service_multipart import CHUNK, parse_multipart

    payload = bytes(range(256)) * (3 * CHUNK // 256 + 7)  # several pieces, the last one short
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"video\"; filename=\"c.mp4\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + payload + (
            f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"grid_size\"\r\n\r\n2\r\n"
            f"--{boundary}--\r\n").encode()
    scope = {"type": "http", "method": "POST", "path": "/v1/track", "query_string": b"",
             "headers": [(b"content-type", f"multipart/form-data; boundary={boundary}".encode())]}
    held, read, at_read = [body], UploadFile.read, []
    del body

    async def recording_read(self, size=-1):  # noqa: ANN001, ANN202 (starlette's signature)
        at_read.append(len(held))
        return await read(self, size)

    monkeypatch.setattr(UploadFile, "read", recording_read)
    upload, params = anyio.run(parse_multipart, scope, held)
    assert upload.data == payload and upload.label == "uploaded clip 'c.mp4'" and params == {"grid_size": "2"}
    assert at_read == [0], at_read  # the body was gone when the upload was read back


def test_a_json_body_over_its_own_cap_is_413_naming_it_and_how_to_send_frames(service_root):
    """A JSON body was allowed up to max_upload_mb (256 MiB), which parses to ~1.3 GB of Python objects, none of it
    counted in the memory budget, though a JSON request (a path and options) is under ~1 MB: frames travel as .npy
    or multipart. A JSON body has its own cap (MAX_JSON_BODY_MB), named in the 413 with how to send frames."""
    import json

    from tools.service_params import MAX_JSON_BODY_MB

    app = create_app(ToolSettings(), service_root, tracker=LKTracker(), enable_surprise=False)
    request = {"path": "clip.mp4", "grid_size": 2, "frame_indices": [0, 1]}
    with TestClient(app) as c:
        big = json.dumps(request).encode()[:-1] + b" " * int(MAX_JSON_BODY_MB * 2**20) + b"}"
        r = c.post("/v1/track", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert f"{MAX_JSON_BODY_MB:g} MiB" in detail and "application/x-npy" in detail and "multipart" in detail
        fits = json.dumps(request).encode()[:-1] + b" " * 2**20 + b"}"  # a 1 MiB JSON body still fits
        r = c.post("/v1/track", content=fits, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert c.get("/v1/info").json()["max_json_bytes"] == int(MAX_JSON_BODY_MB * 2**20)
