"""Validating a structured reply against its pydantic schema (graph.backbone's structured outputs): the
re-askable `InvalidReply`, the re-ask message, the checks of a reply's JSON object (`graph.replies`
extracts it from the text), and reading the result of `with_structured_output(..., include_raw=True)`
(`read_structured`), and the whole reading of a structured call's result (`read_reply`: a refusal is a
`ReplyFault`, not a re-ask)."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from langchain_core.exceptions import ModelRefusalError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ValidationError

from graph.replies import (
    CUT_HINT,
    MODEL_REFUSED,
    cut_at_token_limit,
    declined,
    extract_json_object,
    reasoning_only,
    schema_mismatch,
)
from graph.schemas import EMPTY_IS_NO_ANSWER

M = TypeVar("M", bound=BaseModel)

ERR_CHARS = 1500
"""Characters of an error quoted back to the model (and in fault messages): `excerpt`, whole errors only."""
SHOWN_CHARS = 16000
"""Characters of a rejected reply shown back to the model (`reask`): whole but for a runaway one (a reply rejected
for an item over its limit is long by nature, and its error names items past any short cut)."""


class ReplyFault(Exception):
    """A reply that ends the stage at once, not re-asked (the backbone raises it as a BackboneFault of its stage)."""

    def __init__(self, kind: Literal["refused", "invalid_reply", "settings"], message: str) -> None:
        super().__init__(message)
        self.kind: Literal["refused", "invalid_reply", "settings"] = kind
        self.message = message


class InvalidReply(Exception):
    """A reply that came back but cannot be used (re-askable); `cut`: the server cut it at the token limit."""

    def __init__(self, kind: Literal["invalid_reply", "empty_reply"], message: str, text: str = "",
                 *, cut: bool = False) -> None:
        super().__init__(message)
        self.kind: Literal["invalid_reply", "empty_reply"] = kind
        self.message = message
        self.text = text
        self.cut = cut


SHORTER = ("Your reply ran past the output token limit, which is the same for this reply: write a shorter answer "
           "(less reasoning before it, shorter rationales, no text outside the answer).")
"""What the re-ask of a reply cut at the token limit tells the model (`reask_tail`): CUT_HINT names a setting, which
the model cannot change; only a shorter answer fits under the same cap."""


def reask_tail(bad: InvalidReply) -> str:
    """The line a re-ask adds for `bad`: `SHORTER` for a reply cut at the token limit, else ""."""
    return f"\n{SHORTER}" if bad.cut else ""


def reask(schema_name: str, bad: InvalidReply) -> list[BaseMessage]:
    """The messages that re-ask a rejected structured reply: the reply, then why it was rejected."""
    return [*shown(bad), HumanMessage(content=(
        f"Your previous reply was rejected ({bad.kind}): {excerpt(bad.message)}{reask_tail(bad)}\n"
        f"Reply again with only one JSON object for {schema_name} that satisfies the schema."))]


_DOC_LINK = re.compile(r"\n[ \t]+For further information visit https?://errors\.pydantic\.dev/\S*")
"""The documentation link pydantic ends each error with: nothing the model (or a researcher's fault) can use."""
_NAMED_CHARS = 300
"""Characters of the list naming the errors an excerpt leaves out."""


def excerpt(message: str, limit: int = ERR_CHARS) -> str:
    """`message` (an error quoted back to the model, or in a fault) in at most about `limit` characters: pydantic's
    documentation links dropped, then, when still longer, whole entries only (an entry is a line that is not
    indented with the indented lines after it: one pydantic error, its location then its message and input) and
    a line naming the entries left out by their first line (a pydantic error's location, so the model still knows
    each field to fix). A single entry longer than `limit` is cut inside, saying how many characters were left."""
    text = _DOC_LINK.sub("", message)
    if len(text) <= limit:
        return text
    entries: list[str] = []
    for line in text.split("\n"):
        if entries and line[:1] in (" ", "\t"):
            entries[-1] += "\n" + line
        else:
            entries.append(line)
    kept, size = [], 0
    for entry in entries:
        if size + len(entry) + 1 > limit:
            break
        kept.append(entry)
        size += len(entry) + 1
    if not kept:
        return f"{text[:limit]} [... {len(text) - limit} more characters not shown]"
    left = entries[len(kept):]
    named = ", ".join(entry.split("\n", 1)[0].strip() for entry in left)
    if len(named) > _NAMED_CHARS:
        named = named[:_NAMED_CHARS].rsplit(", ", 1)[0] + ", ..."
    return "\n".join(kept) + f"\n[... {len(left)} more not shown here: {named}]"


def shown(bad: InvalidReply) -> list[BaseMessage]:
    """A rejected reply's text as the model's own turn, whole up to `SHOWN_CHARS`, for the re-ask ([] for none)."""
    if not bad.text:
        return []
    cut = len(bad.text) - SHOWN_CHARS
    return [AIMessage(content=bad.text if cut <= 0 else
                      f"{bad.text[:SHOWN_CHARS]}\n[... {cut} more characters not shown here]")]


def validate_text(schema: type[M], text: str) -> M:
    """`schema` from the JSON object in a reply's text (json_mode, function_calling without a tool call)."""
    if not text.strip():
        raise InvalidReply("empty_reply", "the reply had no content")
    try:
        obj = extract_json_object(text)
        check_fields(schema, json.loads(obj), text)
        return schema.model_validate_json(obj)
    except (ValidationError, ValueError) as exc:
        raise InvalidReply("invalid_reply", str(exc), text) from exc


def check_fields(schema: type[BaseModel], obj: Any, text: str) -> None:
    """`graph.replies.schema_mismatch` of a reply's object, and an empty object for a record where `{}` is no
    answer (`graph.schemas.EMPTY_IS_NO_ANSWER`: an observation of nothing, a clean audit), as an invalid reply."""
    if (why := schema_mismatch(frozenset(schema.model_fields), obj)) is not None:
        raise InvalidReply("invalid_reply", why, text)
    if obj == {} and schema in EMPTY_IS_NO_ANSWER:
        raise InvalidReply("invalid_reply", f"an empty object is no {schema.__name__}: write its fields "
                           f"({', '.join(schema.model_fields)})", text or "{}")


def decode_stored(schema: type[M], text: str) -> M:
    """A stage-cache entry as a `schema` output, held to the checks of a reply (`check_fields`): an entry that
    fails them (`{}` for an Observation or an AuditReport, written by a version before `EMPTY_IS_NO_ANSWER`)
    raises ValueError, which `graph.cache.lookup` takes for an entry that does not decode: a miss, so the stage
    is asked again and the entry replaced. It decoded as an observation of nothing or a clean audit and was
    served on every hit, although the same reply from the model is re-asked."""
    try:
        check_fields(schema, json.loads(text), text)
    except InvalidReply as bad:
        raise ValueError(f"the stored output fails today's checks: {bad.message}") from None
    return schema.model_validate_json(text)


def raw_object(raw: Any) -> Any:
    """The JSON object a structured reply was parsed from (tool-call arguments, or the content), or None."""
    if not isinstance(raw, AIMessage):
        return None
    if raw.tool_calls:
        return raw.tool_calls[0].get("args")
    try:
        return json.loads(extract_json_object(raw.text))
    except ValueError:
        return None


def read_structured(schema: type[M], out: dict[str, Any], *, text_answer: bool) -> M:
    """The `schema` instance of a `with_structured_output(..., include_raw=True)` result, or InvalidReply.

    `text_answer` (function_calling): a reply without a tool call whose content holds a JSON object is
    accepted if it validates, for servers without a tool parser. A tool call whose arguments are not JSON
    is an invalid reply, not an empty one (the model did answer)."""
    raw, parsed, error = out["raw"], out.get("parsed"), out.get("parsing_error")
    if parsed is not None:
        check_fields(schema, raw_object(raw), shown_reply(raw))
        try:
            return parsed if isinstance(parsed, schema) else schema.model_validate(parsed)
        except ValidationError as exc:
            raise InvalidReply("invalid_reply", str(exc), json.dumps(parsed, default=str)) from exc
    text = raw.text if isinstance(raw, AIMessage) else ""
    calls = raw.tool_calls if isinstance(raw, AIMessage) else []
    broken = raw.invalid_tool_calls if isinstance(raw, AIMessage) else []
    if broken and not calls:
        raise InvalidReply("invalid_reply", f"the {broken[0].get('name')!r} call's arguments are not valid JSON "
                           f"({broken[0].get('error') or 'unparsable'})", shown_reply(raw))
    if text_answer and not calls and text.strip():
        return validate_text(schema, text)
    if not text.strip() and not calls:
        why = reasoning_only(raw) if isinstance(raw, AIMessage) else ""
        raise InvalidReply("empty_reply", f"the reply had no content{why}")
    reason = str(error) if error is not None else "the reply did not contain the structured output"
    raise InvalidReply("invalid_reply", reason, shown_reply(raw))


def shown_reply(raw: Any) -> str:
    """A rejected structured reply as the re-ask shows it to the model (`reask`): its tool call's arguments (the
    arguments of each, as a list, when it made several: the answer, not a remark beside it), else those of its first
    call that did not parse, as written (one cut at the token limit), else its text."""
    if not isinstance(raw, AIMessage):
        return ""
    if not raw.tool_calls:
        broken = raw.invalid_tool_calls
        return str(broken[0].get("args") or "") if broken else raw.text
    args = [c["args"] for c in raw.tool_calls]
    return json.dumps(args[0] if len(args) == 1 else args, default=str)


def read_reply(schema: type[M], method: Literal["json_schema", "function_calling", "json_mode"], out: Any) -> M:
    """The `schema` instance of a structured call's result `out` (json_mode: the reply; else the
    `with_structured_output(..., include_raw=True)` dict); `ReplyFault` for a reply the model or server declined
    (LangChain's refusal error, or `graph.replies.declined` of any chat model's reply), `InvalidReply` for one to
    re-ask. A reply the server cut at the token limit is re-asked with the hint to raise RAA_MAX_TOKENS even when
    what it holds validates (a tool call closed before the cut, an object the model kept writing after): the
    model had not finished, and the openai SDK refuses every such reply with json_schema and json_mode, so the
    same cut reply was taken with function_calling, or from another chat model, and re-asked otherwise."""
    raw, error = (out, None) if method == "json_mode" else (out["raw"], out.get("parsing_error"))
    if isinstance(error, ModelRefusalError):
        raise ReplyFault("refused", f"{MODEL_REFUSED}{error}")
    if isinstance(raw, AIMessage) and (why := declined(raw)) is not None:
        raise ReplyFault("refused", why)
    if isinstance(raw, AIMessage) and cut_at_token_limit(raw):  # shown back, as any rejected reply (`reask`)
        raise InvalidReply("invalid_reply", CUT_HINT, shown_reply(raw), cut=True)
    if method == "json_mode":
        if isinstance(raw, AIMessage) and not raw.text.strip():
            raise InvalidReply("empty_reply", "the reply had no content" + reasoning_only(raw))
        return validate_text(schema, raw.text)
    return read_structured(schema, out, text_answer=method == "function_calling")
