"""Who a backbone's calls go to and how they are keyed (DESIGN.md §3 "Backbone"): its chat model and the settings it
calls it with, the temperature it samples at, its draw and its stage-cache keys. `graph.backbone.Backbone` is this
with its calls (retries, structured outputs, tool rounds) and its building from settings (`Backbone.from_settings`,
`graph.backbone.default_chat_model`: kept there, where tests and users replace the default chat model).

- `BackboneIdentity.sampling` / `temperature`: what an OpenAI-family model asks its endpoint for and the
  temperature it samples at (`graph.model_request`), for the stage keys and what a run records
  (`graph.context.backbone_settings`).
- `BackboneIdentity.key_of`: a call's stage-cache key (`graph.cache_keys.stage_key`, `graph.model_request.stage_identity`).
- `BackboneIdentity.for_draw`: the same backbone for runs of another draw (its keys salted with it).
"""

from __future__ import annotations

import copy
import math
from numbers import Real
from typing import Self

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from graph.cache import StageCache
from graph.cache_keys import stage_key
from graph.completion_shape import shaped
from graph.model_request import Requested, requested, sampling_temperature, stage_identity
from graph.settings import StructuredMethod
from graph.transport import BACKBONE_NAMES, EndpointNames


class BackboneIdentity:
    """A backbone's chat model and settings, the temperature it samples at and its stage keys; its calls:
    `graph.backbone.Backbone`."""

    def __init__(self, model: BaseChatModel, *, method: StructuredMethod = "json_schema", schema_retries: int = 2,
                 max_retries: int = 4, timeout_s: float = 120.0, cache: StageCache | None = None,
                 model_name: str | None = None, retry_wait: tuple[float, float] = (0.5, 8.0), draw: int = 0,
                 temperature: float = 0.0, endpoint: str | None = None,
                 setting_names: EndpointNames = BACKBONE_NAMES) -> None:
        if schema_retries < 0 or max_retries < 0 or not 0 < timeout_s < math.inf:  # NaN: every call timed out
            raise ValueError(f"schema_retries and max_retries must be >= 0 and timeout_s a finite number > 0, got "
                             f"{schema_retries}, {max_retries} and {timeout_s}")
        self.model = model
        self.method: StructuredMethod = method
        self.schema_retries = schema_retries
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.cache = cache
        self.model_name = model_name or type(model).__name__
        self.retry_wait = retry_wait
        self.draw = draw
        self.temperature = temperature  # what `model` samples at when not known from it (`temperature`)
        self.endpoint = endpoint  # the base URL of who answers, for the stage keys (graph.cache_keys.endpoint_identity)
        self.setting_names = setting_names  # the settings its faults tell to check (the judge's: RAA_JUDGE_*)
        # the structured runnables of its calls (`graph.backbone.Backbone._structured_runnable`), shared by its draws
        self._runnables: dict[tuple[type[BaseModel], str, int], Runnable] = {}

    @property
    def model(self) -> BaseChatModel:
        """The chat model called; a plain ChatOpenAI given here is read as the one from settings is
        (`graph.completion_shape.shaped`: tool-call arguments as an object, a 200 without a choice)."""
        return self._model

    @model.setter
    def model(self, model: BaseChatModel) -> None:
        self._model = shaped(model)

    @property
    def temperature(self) -> float | None:
        """What the model samples at, for the stage keys and the resume guard (`sampling`: an OpenAI-family
        model's own, None where it sends none, the server's default; else the one given)."""
        return self.sampling()[1]

    @temperature.setter
    def temperature(self, temperature: float) -> None:
        """The temperature given (None: not known): a number >= 0 and finite, as RAA_TEMPERATURE's (graph.settings),
        not a bool. True was keyed `true` while the run recorded it as 1.0's equal (the resume guard let a run resumed
        at 1.0 through, and every stage was asked again); NumPy's was no value the trace checkpointer writes; a NaN
        never equals its own record (the same run's resume refused)."""
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, Real)
                                        or not 0 <= temperature < math.inf):
            raise ValueError(f"temperature must be a number >= 0 and finite, or None, got {temperature!r}")
        self._temperature: float = temperature

    def sampling(self) -> tuple[Requested | None, float | None]:
        """What the model asks its endpoint for (`graph.model_request.requested`; None for a chat model not of the
        OpenAI family) and the temperature it samples at (`temperature`), from one read of its request."""
        request = requested(self.model)
        return request, sampling_temperature(request, self._temperature)

    def for_draw(self, draw: int) -> Self:
        """This backbone for runs of another draw (`graph.config.AgentConfig.draw`): the same model, cache
        and settings, its stage keys salted with the draw (draw 0 keys are unsalted)."""
        other = copy.copy(self)
        other.draw = draw
        return other

    def key_of(self, stage: str, messages: list[BaseMessage], *, method: str, params: dict | None = None,
               schema: type[BaseModel] | None = None, tools: list[dict] | None = None) -> str:
        """The stage-cache key of a call (`graph.cache_keys.stage_key`): who answers it and how it samples
        (`graph.model_request.stage_identity`: this backbone's model name, endpoint, draw and temperature, or what an
        OpenAI-family model asks for)."""
        # the temperature given: stage_identity reads the model's request once, for the temperature too
        name, endpoint, extra = stage_identity(self.model, model_name=self.model_name, endpoint=self.endpoint,
                                               temperature=self._temperature, draw=self.draw)
        return stage_key(model_name=name, endpoint=endpoint, method=method, stage=stage, messages=messages,
                         params={**(params or {}), **extra} if extra else params, schema=schema, tools=tools)
