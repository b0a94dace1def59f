"""A finder that sets a module's function to a stand-in right after the module runs, without importing the module
first: ``sitecustomize`` (every process a test launch starts) and ``tests/conftest.py`` (the pytest process) install it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
from collections.abc import Callable, Mapping
from types import ModuleType


class StandIns(importlib.abc.MetaPathFinder):
    """Finds each module of ``replaced`` (module: (its function, the stand-in)) as the path finder does, and sets its
    function once the module has run."""

    def __init__(self, replaced: Mapping[str, tuple[str, Callable[..., object]]]) -> None:
        self._replaced = dict(replaced)

    def find_spec(self, name: str, path=None, target=None):  # noqa: ANN001 (the finder protocol's arguments)
        if name not in self._replaced:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        attribute, stand_in = self._replaced[name]

        def exec_module(module: ModuleType) -> None:
            run(module)
            setattr(module, attribute, stand_in)

        spec.loader.exec_module = exec_module
        return spec
