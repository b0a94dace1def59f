"""ScriptedChatModel: a LangChain chat model that replies from a script keyed by stage (tests, benchmarks).

A call's stage is the first line of its system message, `# stage: <name>` (every prompt file starts
with it). Per stage the script holds a list of replies (consumed in order; the last one repeats once
the list is exhausted) or a callable `(messages, call_number) -> reply`. A reply is a dict (sent as
JSON content), a str (sent as content), an AIMessage (e.g. with tool_calls) or an Exception instance
(raised). Every call is recorded in `.calls` as `ScriptedCall(stage, messages)`; `bind_tools` and
`with_structured_output` return views sharing the script and the call log. `delay_s` sleeps per
call (asyncio.sleep in async calls, time.sleep in sync ones).

Decision where the issue was silent: a stage with no script raises KeyError naming the stage (the
backbone reports it as a fault, so a test that forgot a stage sees an ineligible result with that
reason rather than a silent default reply).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from prompts import stage_of

Reply = dict | str | AIMessage | BaseException
Script = dict[str, list[Reply] | Callable[[list[BaseMessage], int], Reply]]


@dataclass
class ScriptedCall:
    """One recorded model call."""

    stage: str
    messages: list[BaseMessage]

    def text(self) -> str:
        """All text of the call's messages joined (image URLs excluded)."""
        parts: list[str] = []
        for m in self.messages:
            if isinstance(m.content, str):
                parts.append(m.content)
            else:
                parts += [b.get("text", "") for b in m.content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(parts)

    def images(self) -> int:
        """Number of image blocks in the call."""
        return sum(1 for m in self.messages if not isinstance(m.content, str)
                   for b in m.content if isinstance(b, dict) and b.get("type") == "image_url")


class _Shared:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[ScriptedCall] = []
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()


def stage_from_messages(messages: Sequence[BaseMessage]) -> str:
    """The stage named by the first system message ('' when there is none)."""
    for m in messages:
        if isinstance(m, SystemMessage):
            return stage_of(m.content if isinstance(m.content, str) else str(m.content)) or ""
    return ""


class ScriptedChatModel(BaseChatModel):
    """Chat model replying from a per-stage script (see module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    delay_s: float = 0.0
    model_name: str = "scripted"
    _shared: _Shared = PrivateAttr()

    def __init__(self, script: Script | None = None, *, delay_s: float = 0.0, model_name: str = "scripted",
                 **kwargs: Any) -> None:
        # one dict: mypy types BaseChatModel.__init__ by its own pydantic fields, not this subclass's
        super().__init__(**{**kwargs, "delay_s": delay_s, "model_name": model_name})
        self._shared = _Shared(dict(script or {}))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far, in order."""
        return self._shared.calls

    @property
    def script(self) -> Script:
        """The script (mutable: tests may add stages)."""
        return self._shared.script

    def calls_for(self, stage: str) -> list[ScriptedCall]:
        """Calls of one stage."""
        return [c for c in self.calls if c.stage == stage]

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        stage = stage_from_messages(messages)
        shared = self._shared
        with shared.lock:
            shared.calls.append(ScriptedCall(stage, list(messages)))
            k = shared.counts.get(stage, 0)
            shared.counts[stage] = k + 1
        if stage not in shared.script:
            raise KeyError(f"ScriptedChatModel has no script for stage {stage!r}")
        entry = shared.script[stage]
        reply = entry(list(messages), k) if callable(entry) else entry[min(k, len(entry) - 1)]
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, AIMessage):
            msg = reply.model_copy()
        else:
            msg = AIMessage(content=json.dumps(reply) if isinstance(reply, dict) else str(reply))
        chars = sum(len(m.content) if isinstance(m.content, str) else
                    sum(len(b.get("text", "")) for b in m.content if isinstance(b, dict)) for m in messages)
        msg.usage_metadata = {"input_tokens": chars // 4, "output_tokens": len(str(msg.content)) // 4,
                              "total_tokens": chars // 4 + len(str(msg.content)) // 4}
        return msg

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.delay_s:
            time.sleep(self.delay_s)
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:
        """A bound view sharing the script and call log (tools are not checked)."""
        return self.bind(tools_bound=len(tools), **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        """Parse the JSON content of the reply into `schema` (raw/parsed/parsing_error with include_raw)."""

        def parse(msg: AIMessage) -> Any:
            try:
                text = msg.text.strip()
                if text.startswith("```"):
                    text = text.strip("`").removeprefix("json").strip()
                parsed = schema.model_validate_json(text) if isinstance(schema, type) and issubclass(
                    schema, BaseModel) else json.loads(text)
                error = None
            except (ValidationError, ValueError) as exc:
                parsed, error = None, exc
            if include_raw:
                return {"raw": msg, "parsed": parsed, "parsing_error": error}
            if error is not None:
                raise error
            return parsed

        async def aparse(msg: AIMessage) -> Any:  # parses in place: no executor hop (as ChatOpenAI's parsers)
            return parse(msg)

        return self | RunnableLambda(parse, afunc=aparse)
