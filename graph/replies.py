"""The JSON object in a model's reply text (json_mode, and function_calling replies without a tool call).

`extract_json_object` takes the first balanced `{...}` object after removing what models put around
it: markdown code fences, and a reasoning block. Decisions where the issue was silent:

- Reasoning models served without a reasoning parser return their reasoning in the content:
  `<think>...</think>` (Qwen3, DeepSeek-R1, GLM-4.1V-Thinking) or `◁think▷...◁/think▷` (Kimi-VL). Their
  chat templates often open the block in the prompt, so the reply may hold only the closing tag. The
  object is looked for after the last closing tag; reasoning routinely quotes braces ("I will answer
  {"task_success": ...}") that would otherwise be taken for the answer.
- A reply whose reasoning opens and never closes (output cut at max_tokens) has no answer: the error
  says so, instead of validating a brace the reasoning happened to contain.
- The backbone's check for a tool call left in the text (no tool parser on the server) reads only the
  text after the reasoning (`after_reasoning`): reasoning that spells out a call it is about to make
  is not one.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_THINK_END = re.compile(r"</think>|◁/think▷")
_THINK_START = re.compile(r"<think>|◁think▷")


def after_reasoning(text: str) -> str:
    """`text` after its last closing think tag (all of it when there is none)."""
    ends = list(_THINK_END.finditer(text))
    return text[ends[-1].end():] if ends else text


def strip_reasoning(text: str) -> str:
    """`text` after its reasoning block (the last closing think tag); ValueError for one left open."""
    if _THINK_END.search(text):
        return after_reasoning(text)
    if _THINK_START.search(text):
        raise ValueError("the reply's reasoning block (<think>) never closed, so it holds no answer; "
                         "the output was probably cut at max_tokens (raise RAA_MAX_TOKENS)")
    return text


def extract_json_object(text: str) -> str:
    """The first balanced `{...}` object in `text`, after its reasoning block and code fences;
    ValueError if there is none."""
    stripped = _FENCE.sub("", strip_reasoning(text).strip())
    start = stripped.find("{")
    if start < 0:
        raise ValueError("the reply contains no JSON object")
    depth, in_str, escape = 0, False, False
    for i in range(start, len(stripped)):
        ch = stripped[i]
        if in_str:  # the character after a backslash is escaped, whatever it is
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return stripped[start:i + 1]
    raise ValueError("the reply's JSON object is not closed")
