"""Which failed model calls are the settings' fault, and what to change (graph.transport's `settings_problem`, DESIGN.md
§3 "Faults"): an HTTP status that says so (401, 403, 404, 501, 505), an account without credit (`no_credit`), a model
served without a chat template (`no_template`), a model the chat-completions route does not serve (`_OTHER_ROUTE`), or
a rejection for the server's setup (`graph.setup_rejections.setup_rejection`). Moved out of graph/transport.py, which
keeps the retry policy and re-exports these names.

An account without credit and a model without a chat template are answered alike to every request, whatever the status
they come with: some servers and gateways send them as a 500 (its users report both: a server relaying transformers'
template error, exo-explore/exo#897; a gateway relaying OpenAI's `insufficient_quota`, lm-sys/RouteLLM#14), which was
retried `max_retries` times and then reported "transport", naming nothing to change (`graph.transport.answered_alike`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import openai
from langchain_core.exceptions import (
    ModelAuthenticationError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
)

from graph.server_limits import rejected_request
from graph.server_words import server_answered, server_words
from graph.setup_rejections import Sent, setup_rejection

if TYPE_CHECKING:  # pragma: no cover
    from graph.transport import EndpointNames

SETTINGS_STATUSES = (401, 403, 404)
"""HTTP statuses of a model call that say the client's settings are wrong (`settings_problem`), not the content."""

_SETTINGS_ERRORS = (ModelAuthenticationError, ModelPermissionDeniedError, ModelNotFoundError)
"""LangChain's provider-independent errors for those statuses (another chat model than ChatOpenAI raises them)."""

UNSERVED_STATUSES = (501, 505)
"""5xx statuses that say the server cannot serve such a request at all (never retried: `transient_error`): its
setup, not the clip (`settings_problem`), as the tool client reads a tool service's 501 (tools/client.py)."""

_NO_QUOTA = "insufficient_quota"
"""OpenAI's code for an account without credit, as a gateway relays it inside its own message (LiteLLM: its own type
and `"code": "429"`, OpenAI's error quoted in the message, as its users quote it: OpenHands/OpenHands#998). Not
OpenAI's words "You exceeded your current quota": Gemini's free tier says them of a rate limit (no such code). In a
5xx, read only with those words beside it (`_QUOTA_SENTENCE`: OpenAI's error relayed whole, lm-sys/RouteLLM#14): a
500 whose traceback merely passes through a gateway's quota code (`check_insufficient_quota`) was "settings", never
retried, where it is a crash a retry may pass."""
_QUOTA_SENTENCE = re.compile(r"you\s+exceeded\s+your\s+current\s+quota")
"""OpenAI's message for `_NO_QUOTA`, which a gateway relaying its error as a 5xx quotes with the code: across any
whitespace, as a relay's plain-text body wraps it ("you exceeded your\\ncurrent quota" was missed: retried, then
"transport")."""
_SPENT_BUDGET = "budget_exceeded"
"""A LiteLLM proxy's error type for a key, team or user whose budget is spent ("Budget has been exceeded! Current
cost: ..., Max budget: ...": a 429 in its current versions, BerriAI/litellm#36729; a 400 before, BerriAI/litellm#4139),
which a wait of seconds does not refill."""
_BUDGET_WORDS = re.compile(r"(?<![a-z] )(?:budget has been exceeded!|max budget limit reached|exceeded budget for)|"
                           r"exceeded(?:token|model)?budget:|\b(?:team|user)=[^\s,]+ over budget\. spend=")
"""A LiteLLM proxy's words for a spent budget, read where its error type is not `_SPENT_BUDGET`: a proxy relaying
another's budget error inside its own message, `type` None ("litellm.BadRequestError: OpenAIException - Budget has been
exceeded! Current cost: ..., Max budget: ...", as a maintainer quotes it: BerriAI/litellm#14144; "No deployments
available - crossed budget: Exceeded budget for deployment ...", ibid.), its `max_budget_limiter` hook's 429 "Max
budget limit reached." (litellm/proxy/hooks/max_budget_limiter.py, `type` "None"), an end user's "ExceededBudget: End
User=... over budget. Spend=..., Budget=..." (litellm/proxy/auth/auth_checks.py), an older proxy's API key over its
budget ("ExceededTokenBudget: Current spend for token: ...; Max Budget for Token: ...": a 401 "Authentication Error,
...", or a 400 or 429 by version, which was a bad API key, a refusal or a rate limit; beside it, its key's budget for
one model, "ExceededModelBudget: Current spend for model: ...; Max Budget for Model: ..."), and a team's in its words
of late 2024, "Team=... over budget. Spend=..., Budget=..." (no "ExceededBudget:" before it; `common_checks` there).
Each was retried as a 429, then "transport", or "refused" as a 400. As LiteLLM writes them: a phrase that opens the
message or a clause, not one after a word ("the frame budget has been exceeded", "I exceeded budget for frames": a 400
quoting the request, the model's own earlier answer); and read in a 4xx only (`_budget_words`)."""
_NO_BALANCE = re.compile(r"credit\s+balance\s+is\s+too\s+low")
"""Anthropic's words for an account without credit, a 400 `invalid_request_error` ("Your credit balance is too low to
access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", as its users quote it:
anthropics/claude-code#4208; a LiteLLM proxy relays it as a 400 too, "litellm.BadRequestError: AnthropicException -
{...}", BerriAI/litellm#30852), across any whitespace. In a 5xx, read only as its whole sentence (`_BALANCE_SENTENCE`),
as `_NO_QUOTA` is read there: a server's 500 may quote the model's own output (llama.cpp's "Failed to parse input at
pos N: <output>", a clip's screen read out), which was "settings", never retried, where a retry may pass."""
_BALANCE_SENTENCE = re.compile(r"your\s+credit\s+balance\s+is\s+too\s+low\s+to\s+access\s+the\s+"
                               r"(?:anthropic|claude)\s+api")
"""Anthropic's sentence for `_NO_BALANCE` whole, which a relay answering every upstream error as a 5xx quotes: naming
"the Anthropic API" or "the Claude API" (its users' clients and tests quote both; read as the first alone, a 5xx
relaying the second was retried, then "transport", where any status was "settings" before)."""


def no_credit(exc: BaseException) -> bool:
    """True for an answer saying the API key's account has no credit left: HTTP 402 Payment Required (DeepSeek's
    "Insufficient Balance", api-docs.deepseek.com/quick_start/error_codes; OpenRouter's, Mistral's), or OpenAI's
    `insufficient_quota` ("You exceeded your current quota, please check your plan and billing details.", a 429) as
    its code or type, or in its words under another status or code (`_NO_QUOTA`), a LiteLLM proxy's spent budget
    (`_SPENT_BUDGET`, or in its words: `_budget_words`), Anthropic's spent balance (`_NO_BALANCE`), an OpenRouter key
    over its own credit limit (`_KEY_LIMIT`: its 403 or 402, read in a 4xx only), or those words in
    another chat model's `ModelError` (no status, code or type to read): no wait tops the account up, so not retried
    (a 429 was, as a rate limit, then "transport"; a 402 or 400 was "refused", the model's answer about every clip),
    and "settings" (`settings_problem`)."""
    if isinstance(exc, openai.APIStatusError) and (
            exc.status_code == 402 or _NO_QUOTA in (exc.code, exc.type) or exc.type == _SPENT_BUDGET):
        return True
    words = server_words(exc).lower()
    quota = _NO_QUOTA in words and (rejected_request(exc) or _QUOTA_SENTENCE.search(words) is not None)
    balance = (_NO_BALANCE if rejected_request(exc) else _BALANCE_SENTENCE).search(words) is not None
    return server_answered(exc) and (quota or balance or _budget_words(exc, words) or
                         (rejected_request(exc) and _KEY_LIMIT.search(words) is not None))


def _budget_words(exc: BaseException, words: str) -> bool:
    """Whether `words` (the lowered `server_words` of `exc`) hold a LiteLLM budget's (`_BUDGET_WORDS`) in a rejected
    request (`rejected_request`: a 4xx, not a 5xx `ModelAPIError`): LiteLLM sends them as a 400, 401 or 429, while a
    server's 500 may quote the model's own output (llama.cpp's "Failed to parse input at pos N: <output>"), whose words
    of a budget (a clip's screen read out) made it "settings", not retried, the run ineligible at once."""
    return rejected_request(exc) and _BUDGET_WORDS.search(words) is not None


_ROUTER_BUDGET = re.compile(r"crossed budget(?: for (?:deployment|provider|tag))?: exceeded budget for "
                            r"(deployment|provider|tag)\b")
"""A LiteLLM proxy's router with no deployment of the model within its budgets, which the proxy's admin sets in its
config, for a model's deployment (`max_budget` in `model_list`), a provider (`provider_budget_config`) or a request
tag: a 429, "No deployments available - crossed budget: Exceeded budget for deployment model_name: ..., model_id: ...:
SPEND >= LIMIT" (litellm/router_strategy/budget_limiter.py; its docs, docs/my-website/docs/proxy/
provider_budget_routing.md; "provider openai: ...", "tag='...', ..." alike; those docs' "crossed budget for provider:"
too, which was advised as the key's). No key's budget: it was advised as the API key's account, whose key is not what
to change."""
_KEY_LIMIT = re.compile(r"\bkey limit exceeded\b[^\n]{0,40}?https://openrouter\.ai/|"
                        r"openrouter\.ai/settings/keys and create a key with a higher")
"""OpenRouter's words for an API key over its own credit limit (a limit set per key, total or daily, weekly,
monthly, apart from the account's credits): a 403, "Key limit exceeded (total limit). Manage it using
https://openrouter.ai/settings/keys" (as its users quote it: MCPJam/inspector#1287; earlier "Key limit exceeded.
Manage it using https://openrouter.ai/keys", RooCodeInc/Roo-Code#515), which the generic 403 advice sent to check a
key that may not use the model; and its 402 for a request that limit cannot cover ("... To increase, visit
https://openrouter.ai/settings/keys and create a key with a higher monthly limit", anomalyco/opencode#12219), which
was advised as the account's credit. Read with the OpenRouter page its words name: "API key limit exceeded
(60/minute)." is another server's throttle (Django REST framework's `Throttled`, a 429), which a wait passes and whose
fix is no OpenRouter page (it was "settings" at the first try, never retried)."""
_AFFORD_MAX_TOKENS = re.compile(r"requires more credits,\s+or\s+fewer\s+max_tokens|"
                                r"you\s+requested\s+up\s+to\s+\d+\s+tokens,\s+but\s+can\s+only\s+afford\s+\d+")
"""OpenRouter's 402 for a request whose completion token cap (the model's own maximum where none is sent) the credit
left cannot cover: "This request requires more credits, or fewer max_tokens. You requested up to N tokens, but can
only afford M. ..." (as its users quote it: Gitlawb/openclaude#1125, QwenLM/qwen-code#73): a lower cap may pass
with the same credit, which the advice "top it up" did not name. Either sentence names it, across any whitespace: its
second sentence alone ("You requested up to N tokens, but can only afford M.", as a client quotes it) or a line break
in the phrase (a relay wrapping it) got the advice without the cap."""
_AFFORDS_NONE = re.compile(r"can\s+only\s+afford\s+0(?!\.?\d)")
"""Those words when no token is affordable ("... but can only afford 0.", as its users quote it:
anomalyco/opencode#12219): no lower cap passes, so `_credit_fix` names none (it advised "lower RAA_MAX_TOKENS")."""
_END_USER_BUDGET = re.compile(r"\bend user(?:=[^\s,]+ over budget|: [^\s,]+, exceeded budget for model=)")
"""A LiteLLM proxy's end user (the `user` a request names, counted across API keys) over its budget, which the proxy
answers as a 401 `auth_error` ("ExceededBudget: End User=... over budget. Spend=..., Budget=...", its budget docs,
docs/my-website/docs/proxy/users.md): read before the 401 (`settings_problem`), it sent the user to check a working
key; or over its budget for one model ("LiteLLM End User: ..., exceeded budget for model=...", a `budget_exceeded`:
litellm/proxy/hooks/model_max_budget_limiter.py), which was advised as the API key's account."""


def _credit_fix(exc: BaseException, names: EndpointNames) -> str:
    """What to change for an answer that no credit is left (`no_credit`), naming the settings `names`: the budget a
    LiteLLM proxy's admin set for a model's deployment, a provider or a tag (`_ROUTER_BUDGET`) or for an end user
    (`_END_USER_BUDGET`), an OpenRouter key's own credit limit (`_KEY_LIMIT`), else the API key's account (its
    balance, quota or budget); a lower completion token cap too, where the server says one would pass
    (`_AFFORD_MAX_TOKENS`)."""
    prefix = f"HTTP {exc.status_code}: " if isinstance(exc, openai.APIStatusError) else ""
    words = server_words(exc).lower()
    if (router := _ROUTER_BUDGET.search(words)) is not None:
        spent, keys = {"deployment": ("the model's deployment", "model_list's max_budget, budget_duration"),
                       "provider": ("the model's provider", "provider_budget_config's budget_limit, time_period"),
                       "tag": ("a tag of the request", "its tag budget's max_budget, budget_duration")}[router.group(1)]
        ways = ["wait for it to reset", "have the admin raise it"] + (
            [f"set {names.model} to another model the proxy serves"] if router.group(1) != "tag" else [])
        return (f"{prefix}the LiteLLM proxy's budget for {spent} is spent (the proxy admin's setting in its config, "
                f"{keys}; not the API key's): {', '.join(ways[:-1])}, or {ways[-1]}")
    if _END_USER_BUDGET.search(words):
        return (f"{prefix}the LiteLLM proxy's budget for the end user it names is spent, no credit left (the proxy "
                f"admin's setting, counted across API keys: {names.api_key} is not the cause): wait for it to reset "
                "(its budget_duration), or have the admin raise it")
    cap = f"lower {names.max_tokens} (the completion token cap the credit is held for)" \
        if names.max_tokens and _AFFORD_MAX_TOKENS.search(words) and not _AFFORDS_NONE.search(words) else ""
    if _KEY_LIMIT.search(words):
        return (f"{prefix}the API key's own credit limit is spent (OpenRouter's limit set per key, apart from the "
                "account's credits; a daily, weekly or monthly one resets): raise or remove it at "
                f"https://openrouter.ai/settings/keys, or set {names.api_key} to a key with credit left"
                + (f", or {cap}" if cap else ""))
    if cap:
        return (f"{prefix}the API key's account has too little credit for the request's completion token cap: {cap}, "
                f"or add credit to the account of {names.api_key} (OpenRouter: https://openrouter.ai/settings/credits)")
    return (f"{prefix}the API key's account has no credit left (its balance, quota or budget): top it up, or check "
            f"{names.api_key}")


_NO_TEMPLATE = re.compile(r"default chat template is no longer allowed|tokenizer\.chat_template is not set|"
                          r"template error: template not found")
"""A model served without a chat template, which every chat request needs: vLLM's "As of transformers v4.44, default
chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one." (a
400, as its users report it), transformers' "Cannot use chat template functions because tokenizer.chat_template is not
set and no template argument was passed!" (`PreTrainedTokenizerBase.get_chat_template`, relayed by a server: SGLang,
sgl-project/sglang#3385; as a 500: exo-explore/exo#897), TGI's "Template error: template not found" (a 422, error_type
`template_error`: minijinja's TemplateNotFound for a tokenizer_config without one, as its users quote it,
huggingface/text-generation-inference#1427). Was "refused" for every clip (as a 500: retried, then "transport")."""


def no_template(exc: BaseException) -> bool:
    """True when the server says it has no chat template for the model (`_NO_TEMPLATE`), with any error status."""
    return server_answered(exc) and _NO_TEMPLATE.search(server_words(exc).lower()) is not None


_OTHER_ROUTE = re.compile(r"only supported in v1/responses|not a chat model and thus not supported in the "
                          r"v1/chat/completions|the chatcompletion operation does not work with the specified model")
"""OpenAI's 404s for a model its chat-completions route does not serve, whose URL and name are right: "This model is
only supported in v1/responses and not in v1/chat/completions." (gpt-5-pro, deep-research models) and "This is not a
chat model and thus not supported in the v1/chat/completions endpoint. Did you mean to use v1/completions?" (as its
users quote them: n8n-io/n8n#18352, pgadmin-org/pgadmin4#9795, Chanzhaoyu/chatgpt-web#1428; not read in an OpenAI
source). The generic 404 hint sent the user to check the base URL's /v1. Azure OpenAI says it as a 400, code
`OperationNotSupported`: "The chatCompletion operation does not work with the specified model, NAME. ..." (as its
users quote it: langchain-ai/langchain-azure#228, run-llama/llama_index#16503), which was "refused" for every clip."""


def settings_problem(exc: BaseException, names: EndpointNames, sent: Sent | None = None,
                     method: str | None = None) -> str | None:
    """What to fix when a model call failed with an error the client's or the server's settings cause, naming
    the settings `names`; None for any other error. An HTTP status: 401 (the API key), 403 (a key that may not use
    the model), 404 (a base URL without its `/v1`, vLLM's root answering `{"detail": "Not Found"}`, or a model the
    server does not serve, or serves on another route than chat completions: `_OTHER_ROUTE`); an account without
    credit (`no_credit`, read before the statuses: a LiteLLM proxy answers an end user's spent budget with a 401; the
    budget spent named by `_credit_fix`), a model without a chat template (`no_template`), whatever their status; or a
    request over a limit of the server's setup or with a part the server or model does not take
    (`graph.setup_rejections.setup_rejection`); or a 501 or 505 (`UNSERVED_STATUSES`: the server does not implement
    the request, every clip's). Any other 400 or 422 (a content policy, a request the server rejects) is no such
    problem: the same settings serve other requests. `sent`: the request as sent, read where `exc` has none attached
    (another chat model's `ModelError`); `method`: the client's structured method (as `setup_rejection` reads it)."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    if status not in SETTINGS_STATUSES:
        status = next((code for code, kind in zip(SETTINGS_STATUSES, _SETTINGS_ERRORS, strict=True)
                       if isinstance(exc, kind)), None)
    if no_credit(exc):  # before the 401: LiteLLM answers an end user over budget as a 401 `auth_error`
        return _credit_fix(exc, names)
    if status == 401:
        return f"HTTP 401: the endpoint refused the API key: check {names.api_key} (EMPTY for a vLLM server " \
               "started without --api-key)"
    if status == 403:
        return f"HTTP 403: the API key may not use this endpoint or model: check {names.api_key} and {names.model}"
    if (status == 404 or rejected_request(exc)) and _OTHER_ROUTE.search(server_words(exc).lower()):
        code = exc.status_code if isinstance(exc, openai.APIStatusError) else status
        return (f"{f'HTTP {code}: ' if code else ''}the server does not serve this model through chat completions "
                f"(OpenAI serves some only through its Responses API): set {names.model} to a model that chat "
                "completions serve")
    if status == 404:
        check = f" ({names.checked_by})" if names.checked_by else ""
        return f"HTTP 404: check that {names.base_url} ends in /v1 and that the server serves {names.model}{check}"
    if isinstance(exc, openai.APIStatusError) and exc.status_code in UNSERVED_STATUSES:
        return (f"HTTP {exc.status_code}: the server does not implement such a request: check {names.base_url} and "
                f"{names.model}: the server must serve chat completions with what the agent asks of it (images, "
                "structured output, tool calls), which some servers serve only when started with an option for it")
    if no_template(exc):
        return (f"the server has no chat template for the model (a base model, or a tokenizer without one): set "
                f"{names.model} to a chat (instruct) model, or give the server its template (vLLM, SGLang: "
                "--chat-template FILE)")
    return setup_rejection(exc, names, sent, method)
