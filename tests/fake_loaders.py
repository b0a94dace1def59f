"""A stand-in for a diffusers / transformers ``from_pretrained`` or ``load_config`` (mocked at the call boundary:
no network), for tests of what each part's loader is called with."""

from __future__ import annotations

from typing import Any


def recording_loader(seen: dict[str, dict], name: str, result: Any) -> classmethod:
    """A classmethod to monkeypatch onto a loader: records its call (``path`` and keyword arguments) in
    ``seen[name]`` and returns ``result``."""
    def load(_cls, path, **kwargs):
        seen[name] = {"path": path, **kwargs}
        return result
    return classmethod(load)
