"""What the backbone does with one tool-round reply (graph.tool_rounds, DESIGN.md §3 "Backbone"):
use it, re-ask it (`InvalidReply`), or end the stage at once (`ReplyFault`), and the check of a stored one; and
what a chat model that cannot call tools or give structured output is told (`unsupported`: a "settings" fault).

- A refusal (or a content-filter stop: `graph.replies.declined`) is "refused" at once.
- Tool calls whose arguments do not parse are re-asked, the call shown back as the model wrote it.
- A reply carrying a well-formed tool call as plain text (a `<tool_call>` tag, `[TOOL_CALLS]`, or a JSON object
  with a name and its arguments) means the server has no parser for the model's format: the inspection the model
  asked for would silently not happen. It is a "settings" fault at once (the server would parse the next reply no
  better; an outage, `graph.schemas.OUTAGE_FAULTS`, as a 400 saying the server serves no tool calls is,
  `graph.setup_rejections`: as "invalid_reply" the trainer counted every clip of a server without the parser as one
  the agent could not judge), never cached, and its message says how to fix it. A call whose JSON does not parse
  is the model's mistake (a server with a parser hands such a call back as text) and is re-asked, its text shown
  back.
- A final reply (no tool call) must hold an answer after its reasoning: empty text, only a reasoning block, or
  one left open is re-asked as an empty reply; a rejected reply the server cut at the token limit says so, is
  shown back like any other (the call as written) and the model is asked for a shorter answer
  (`graph.validation.SHORTER`: the hint to raise RAA_MAX_TOKENS names a setting the model cannot change).
- Decided: a reply cut at the token limit (finish_reason "length") whose tool calls all parsed is used and its
  calls run. Each is whole (its arguments parsed as a JSON object, which parses only once closed; a call the cut
  reached is in `invalid_tool_calls`, or a server's parser hands the whole output back as text: re-asked with
  the hint); the cut fell after them (a closing remark, or a call the parser dropped, which the model can ask
  for in its next round). A re-ask would send the same request under the same cap, likely cut again until the
  stage faulted, for calls the model wrote whole. Such a reply is not cached (graph.tool_rounds).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from graph.cache import decode_tool_reply
from graph.replies import (
    CUT_HINT,
    TEXT_TOOL_CALL,
    after_reasoning,
    cut_at_token_limit,
    declined,
    malformed_text_call,
    no_answer,
    reasoning_only,
    stored_reply_problem,
)
from graph.setup_rejections import INSPECT_PLAN, PLAN_SETTING, SERVE_TOOLS
from graph.validation import InvalidReply, ReplyFault, excerpt, reask_tail, shown

TOOLS_REMEDY = f"{SERVE_TOOLS} or {INSPECT_PLAN}"
PLAN_REMEDY = f"inspect with one structured plan instead ({PLAN_SETTING})"
STRUCTURED_REMEDY = "RAA_STRUCTURED_METHOD=json_mode asks for the JSON in the reply text, which any chat model can give"


def unsupported(model: object, what: str, exc: NotImplementedError, remedy: str) -> str:
    """The message of a chat model that cannot `what` (its NotImplementedError `exc`, often without a message)."""
    detail = f" ({exc})" if str(exc) else ""
    return f"the chat model {type(model).__name__} cannot {what}{detail}; {remedy}"


def check_tool_reply(reply: AIMessage) -> None:
    """Nothing when `reply` can be used; else `InvalidReply` (re-ask) or `ReplyFault` (module docstring)."""
    if (why := declined(reply)) is not None:
        raise ReplyFault("refused", why)
    problem = _problem(reply)
    if problem is None:
        return
    if cut_at_token_limit(reply):  # shown back as any rejected reply (`reask_tool_round`), asked to be shorter
        if "RAA_MAX_TOKENS" in problem.message:  # a reasoning block left open says so already
            raise InvalidReply(problem.kind, problem.message, problem.text, cut=True)
        raise InvalidReply("invalid_reply", f"{CUT_HINT}; {problem.message}", problem.text, cut=True)  # cut args
    raise problem


def _problem(reply: AIMessage) -> InvalidReply | None:
    if reply.invalid_tool_calls:
        bad_call = reply.invalid_tool_calls[0]
        return InvalidReply("invalid_reply", f"tool call {bad_call.get('name')!r} has invalid arguments: "
                            f"{bad_call.get('error') or bad_call.get('args')}", str(bad_call.get("args") or ""))
    if reply.tool_calls:
        return None
    if TEXT_TOOL_CALL.search(answer := after_reasoning(reply.text)):
        if (why := malformed_text_call(answer)) is not None:
            return InvalidReply("invalid_reply", why, reply.text)
        raise ReplyFault("settings", f"the server returned a tool call as plain text "
                         f"({reply.text.strip()[:160]!r}); " + TOOLS_REMEDY)
    if (why := no_answer(reply.text)) is not None:
        return InvalidReply("empty_reply", why + ("" if reply.text.strip() else reasoning_only(reply)))
    return None


def checked_tool_reply(text: str) -> AIMessage:
    """A stored tool-round reply, held to today's checks (`graph.replies.stored_reply_problem`): one that fails
    them raises ValueError, which `graph.cache.lookup` takes for an entry that no longer decodes (a miss)."""
    reply = decode_tool_reply(text)
    if (why := stored_reply_problem(reply)) is not None:
        raise ValueError(f"the stored reply fails today's checks: {why}")
    return reply


def reask_tool_round(bad: InvalidReply) -> list[BaseMessage]:
    """The messages that re-ask a rejected tool-round reply: the call it made (as text: a call whose arguments do
    not parse, or one written in the text), then why it was rejected."""
    return [*shown(bad), HumanMessage(content=f"Your previous reply was rejected ({bad.kind}): "
                                              f"{excerpt(bad.message)}{reask_tail(bad)}\n"
                                              "Call a tool with valid arguments or give your final answer.")]
