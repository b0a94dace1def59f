"""What an OpenAI-family chat model asks its endpoint for: the served model, the address, and the request parameters
that shape its answers (`requested`). The backbone keys its stage outputs by them (`stage_identity`, graph/cache.py)
and a run records the served model and the completion limit for the resume guard (`graph.context.backbone_settings`).

The family is langchain-openai's `BaseChatOpenAI`: `ChatOpenAI`, `AzureChatOpenAI`, and other providers' subclasses
(langchain-deepseek's `ChatDeepSeek`). The fields live there, so reading them from `ChatOpenAI` alone recorded None for
the others. Another chat model's request is not known here (None): its stage keys name it as the backbone does.

Decisions where the issue was silent:
- The served model is the `model_name` the request names; Azure's deployment when it has one (Azure routes a request
  by its deployment, and its `model` is for tracing only). None when neither is set.
- The address is the model's own base URL (`base_url`, Azure's `azure_endpoint`): where its requests go, which may not
  be the settings' `RAA_BASE_URL` it was injected with. A model with none set (ChatOpenAI's default address, or a
  subclass that keeps its address in a field of its own, as ChatDeepSeek's `api_base`) gives None, and the backbone's
  endpoint is keyed, as before.
- The temperature is the one the model sends; the one built from settings (`ShapedChatOpenAI.asked_temperature`) gives
  RAA_TEMPERATURE where langchain-openai sends none (a gpt-5 model), so that agent's keys and records are unchanged.
- The parameters are those langchain-openai sends with every request (`sent_params`: its private
  `BaseChatOpenAI._default_params`; sampling, penalties, seed, stop sequences, `reasoning_effort`, `extra_body`,
  `model_kwargs`...), less the model, streaming (how the reply is delivered, not what it says), the temperature and
  the completion limit (as sent: `max_completion_tokens`, else `max_tokens`), which are kept apart.
  More than shapes an answer may be there (`store`, `service_tier`): such an entry only costs a miss, never a wrong
  output. Timeouts, retries, headers and the API key are not request parameters and stay out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_openai import AzureChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI

from graph.completion_shape import ShapedChatOpenAI

_KEPT_APART = frozenset({"model", "stream", "temperature"})


@dataclass(frozen=True)
class Requested:
    """What an OpenAI-family chat model asks for (module docstring)."""

    served_model: str | None
    endpoint: str | None
    temperature: float | None
    """None: none sent, the server's default."""
    max_tokens: int | None
    """The completion-token limit; None: the server's."""
    params: dict[str, Any] = field(default_factory=dict)
    """The other request parameters it sends."""


def requested(model: BaseChatModel) -> Requested | None:
    """What `model` asks its endpoint for, when it is an OpenAI-family chat model; None for another."""
    if not isinstance(model, BaseChatOpenAI):
        return None
    served, endpoint = model.model_name, model.openai_api_base
    if isinstance(model, AzureChatOpenAI):
        served, endpoint = model.deployment_name or served, model.azure_endpoint or endpoint
    params = {k: v for k, v in sent_params(model).items() if k not in _KEPT_APART}
    # the limit as sent: ChatOpenAI and Azure send their `max_tokens` as max_completion_tokens, and a BaseChatOpenAI
    # given max_completion_tokens (no field of its: `model_kwargs`) sends it so, its `max_tokens` None
    limit = params.pop("max_completion_tokens" if "max_completion_tokens" in params else "max_tokens", None)
    temperature = model.temperature
    if temperature is None and isinstance(model, ShapedChatOpenAI):  # the settings' where langchain sends none
        temperature = model.asked_temperature
    return Requested(served, endpoint, number(temperature, Real, float), number(limit, Integral, int), params)


def sent_params(model: BaseChatOpenAI) -> dict[str, Any]:
    """The parameters `model` sends with every request besides its messages, as langchain-openai builds them: its
    private `BaseChatOpenAI._default_params`, which each request's payload starts from (`_get_request_payload`).
    The one read of a private name here: langchain-openai (1.8) has no public way to them. langchain-core's `asdict()` gives them beside what a
    class names itself by (`model_name`, `_type`, Azure's `azure_deployment`: another subclass may add others), a
    dump of the fields is not what is sent (None not dropped, `max_tokens` not renamed, `model_kwargs` not merged),
    and `_get_request_payload` / `_get_invocation_params` are private too. A langchain-openai that drops it or builds
    its requests from something else fails tests/test_model_request_sent_params.py, saying what to do."""
    return model._default_params


def number(value: Any, kind: type, as_type: type) -> Any:
    """`value` as a plain `as_type` when it is a number of `kind` (not a bool): a NumPy scalar (a limit assigned to a
    ChatOpenAI after it was built, which pydantic does not check) is no value the trace checkpointer writes, and keyed
    as text it would be another key than the same limit's."""
    return as_type(value) if isinstance(value, kind) and not isinstance(value, bool) else value


def sampling_temperature(request: Requested | None, given: float | None) -> float | None:
    """The temperature a model samples at, for its stage keys (`stage_identity`) and what a run records
    (`graph.backbone.Backbone.temperature`): an OpenAI-family model's own (`request`, from `requested`: what it
    sends, None for none, the server's default), else `given`, the backbone's (another chat model's is not known), as
    a float (`number`), as the OpenAI family's and the run's record are: an int given keyed "1" where 1.0 keyed "1.0",
    while the resume guard took both for the same run (recorded 1.0), so a run resumed at 1.0 asked the model again."""
    return number(given, Real, float) if request is None else request.temperature


def stage_identity(model: BaseChatModel, *, model_name: str, endpoint: str | None, temperature: float,
                   draw: int) -> tuple[str, str | None, dict[str, Any]]:
    """(model name, endpoint, parameters) of the stage keys of a backbone that calls `model`, named `model_name` at
    `endpoint` and given `temperature`, at draw `draw`. The draw and the temperature it samples at
    (`sampling_temperature`) are parameters when not 0, so the keys at the defaults are those from before either was
    keyed (None, an OpenAI-family model's server default, is no 0). An OpenAI-family model is keyed by what it asks
    for (`requested`): its served model, its own address (the backbone's when it has none), its completion limit when
    set, and its other request parameters when any. The agent built from settings asks for what the settings name,
    at their address and temperature, without other parameters: its keys are those from before its request was read;
    another chat model's are too."""
    extra: dict[str, Any] = {"draw": draw} if draw else {}
    request = requested(model)
    sampled = sampling_temperature(request, temperature)
    # None is keyed as an OpenAI-family model's server default only: a None given for another chat model never was
    if sampled != 0 and (sampled is not None or request is not None):
        extra["temperature"] = sampled
    if request is None:
        return model_name, endpoint, extra
    if request.max_tokens is not None:
        extra["max_tokens"] = request.max_tokens
    if request.params:
        extra["request"] = request.params
    return request.served_model or model_name, request.endpoint or endpoint, extra
