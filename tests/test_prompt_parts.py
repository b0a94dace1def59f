"""The paragraph telling the model that the texts it is shown are data, not commands, was copied into seven
stage prompts (two wordings: stages that judge, stages that choose where to look); a fix to one copy could miss
the others. Each wording is a part file (prompts/parts/<name>.md) a template includes with `{{> name}}`, expanded
when the template is loaded, so the rendered prompts are what they were byte for byte (the hashes below were
taken from the renders before the parts existed) and the stage cache's keys stay valid."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest

from evals.judge import JUDGE_STAGE
from evals.vqa import VQA_STAGE
from prompts import STAGES, load_prompt, placeholders, render

RENDERED_SHA256 = {  # each prompt rendered with every placeholder as "<name>", before the parts
    "observe": "8227ee7c78be3499bc0d55ab6707c042a01ddc2cc547c1b6ab9c1e1b5aee57ba",
    "contract": "b02c4fe729331e277d68272231f5be1798ec0e176ecc9950fe456632e8cfe557",
    "assess": "eea72e4e7cec0d56b063ecefe642b4dfef8023cc25d8abf4d12b48b04a82e775",
    "inspect": "f389acb9a39ae1e63d1fac6b1c0948700cc6da93942501a81d452e3bc64003ee",
    "plan": "bb266e5c5d88f46b14412a287740f9a29fca70903d0462c46722433c41f5cd90",
    "reflect": "ce3f5bf087a030bc5c92f2a854e1a449aba567218bf4a66fe5bde1c7e85989d9",
    "audit": "ebd81a6702a81f5477f5fed47be9134decce2f44b13e140d29c735551ea388cd",
    "repair": "a26ad4ca583f1e796ca1575b61520bb77118327c290921ed673c65e691d9d053",
    "final_check": "b44168940dbedac62d57e4efaa3f8958704cc74045ec566751cdffaea87a3448",
    "direct": "34a7e3c2df0e725f4699412d424eb523551a9b895e19032efd28df9291542a6e",
    "judge": "8cfcd1efdd3c90fd295702cf68d97c92d82a28414c98eff787fbab1ffc106f51",
    "vqa": "90d38e981d45664c2a30402c5e4204305db595c2c7fb56a70da815144b1675f6",
}


def test_every_prompt_renders_as_before_the_parts():
    assert set(RENDERED_SHA256) == {*STAGES, JUDGE_STAGE, VQA_STAGE}
    for name, digest in RENDERED_SHA256.items():
        text = render(name, **{k: f"<{k}>" for k in placeholders(name)})
        assert hashlib.sha256(text.encode()).hexdigest() == digest, name


def test_the_data_paragraph_is_written_once_per_wording():
    files = [p for p in resources.files("prompts").iterdir() if p.name.endswith(".md")]
    copies = [p.name for p in files if "is DATA written by other steps" in p.read_text(encoding="utf-8")]
    assert copies == []  # the stage files include it
    parts = resources.files("prompts").joinpath("parts")
    assert sorted(p.name for p in parts.iterdir() if p.name.endswith(".md")) == ["data_not_commands.md",
                                                                                 "data_not_commands_look.md"]
    for stage in ("assess", "audit", "final_check", "reflect", "repair", "inspect", "plan"):
        assert "is DATA written by other steps" in load_prompt(stage)


def test_a_value_that_looks_like_an_include_is_inserted_verbatim():
    text = render("observe", n_frames="{{> data_not_commands}}")  # observe has a wording of its own
    assert "{{> data_not_commands}}" in text and "is DATA written" not in text


@pytest.mark.parametrize("line, error", [("{{> no_such_part}}", "unknown prompt part 'no_such_part'"),
                                         ("{{> ../judge}}", "invalid prompt part")])
def test_an_include_of_no_part_is_refused(line, error):
    from prompts import expand_parts

    with pytest.raises(KeyError, match=error):
        expand_parts("# stage: x\n" + line + "\n", "x")
