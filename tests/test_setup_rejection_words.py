"""What each of graph.setup_rejections' wording matchers matches (`_TOOLS`, `_STRUCTURED`, `_IMAGES`), pinned on the
servers' own words and on words that must stay unmatched: their shared pieces ("not supported", "does not support")
are written once, and a change of one must show here."""

from __future__ import annotations

import pytest

from graph.setup_rejections import _IMAGES, _STRUCTURED, _TOOLS

MATCHERS = {"tools": _TOOLS, "structured": _STRUCTURED, "images": _IMAGES}

WORDS = [  # (a server's words, the one matcher that matches them, None for none)
    ("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", 'structured'),
    ('invalid value: `json_schema`', None),
    ('This response_format type is unavailable now', 'structured'),
    ('response_format.type `json_schema` is unavailable now', 'structured'),
    ('The provided JSON schema contains features not supported by xgrammar.', 'structured'),
    ("response_format.type: Input should be 'text' or 'json_object'", 'structured'),
    ("'response_format.type' must be 'json_schema' or 'text'", 'structured'),
    ('response_format type must be one of "text" or "json_object", but got: json_schema', 'structured'),
    ("unsupported parameter: 'response_format'", 'structured'),
    ('this model does not support response_format', 'structured'),
    ("model doesn't support json mode", 'structured'),
    ('deepseek-reasoner does not support json output.', None),  # read as a whole message: deepseek_words
    ('response_format\nis fine but temperature not supported', None),
    ('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', 'tools'),
    ('tools param requires --jinja flag', 'tools'),
    ('registry.ollama.ai/library/gemma:2b does not support tools', 'tools'),
    ("'tools' is not supported with this model.", 'tools'),
    ('Tool calling is not supported for model x', 'tools'),
    ('The tool call is not supported', 'tools'),
    ('Unsupported tool_call_parser', 'tools'),
    ('tool_choice is not supported', 'tools'),
    ('functions are unsupported', 'tools'),
    ('function calling unsupported', 'tools'),
    ('tool use not supported', 'tools'),
    ("doesn't support function call", 'tools'),
    ("Error in extracting tool call from response: the tools' arguments were malformed", None),
    ('image_url is only supported by certain models.', 'images'),
    ('At most 0 image(s) may be provided in one prompt.', 'images'),
    ('You set or defaulted to \'{"image": 0}\' in `--limit-mm-per-prompt`', 'images'),
    ('Qwen/Qwen2-7B is not a multimodal model', 'images'),
    ('image input is not supported - hint: if this is unexpected, you may need to provide the mmproj', 'images'),
    ('unknown variant `image_url`, expected `text`', 'images'),
    ('this model is missing data required for image input', 'images'),
    ('image modality is not supported', 'images'),
    ('vision is not supported', 'images'),
    ('multimodal inputs are unsupported', 'images'),
    ('this model does not support images', 'images'),
    ('model cannot accept image inputs', 'images'),
    ('does not support images larger than 5 MB', None),
    ('does not support image inputs with this encoding', None),
    ("doesn't take images over 20MB", None),
    ('Error in vision encoder: image input of shape (3, 448, 448) raised an exception', None),
    ('Invalid prompt: your prompt was flagged as potentially violating our usage policy.', None),
    ('You uploaded an unsupported image. Please make sure your image is valid.', None),
    ('json_object output must be valid JSON', 'structured'),
    ('guided_json is not supported', 'structured'),
    ('structured output unsupported', 'structured'),
    ('json schema invalid value', 'structured'),
    ('grammar is not supported', None),
]


@pytest.mark.parametrize(("words", "matcher"), WORDS)
def test_each_matcher_matches_exactly_its_words(words: str, matcher: str | None) -> None:
    matched = [name for name, regex in MATCHERS.items() if regex.search(words.lower())]
    assert matched == ([matcher] if matcher else []), matched
