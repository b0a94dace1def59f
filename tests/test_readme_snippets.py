"""The README's reward-agent Python snippets, run as written (with a scripted model and fake tools).

"The reward agent" block is executed unchanged, top-level `await` included (the README says it runs in a
notebook cell as written: inside a running event loop, where the sync `score_video` and `agent.invoke`
go through `graph.bridge`). Only what a reader supplies is supplied: the clips it names, and the chat
model and tools, which `graph.builder.build_reward_agent` fills in where the snippet leaves them to the
`RAA_*` settings (those would reach an endpoint and load V-JEPA 2). The "Your own evidence tools" block
is checked for the names it uses, since running it needs the tool settings' V-JEPA 2. The "Policy and DynDiff
sampler" block runs on the tiny model its comment offers (9 frames on the CPU), and the README's other names, the
`raa demo` options it lists and its `training.*` command lines are checked against the code.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest
from graph_scripts import FakeSurprise, full_script, moving_square

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(after: str) -> str:
    """The first ```python block after the heading line `after`."""
    text = README.read_text()
    start = text.index(after + "\n")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


@pytest.fixture
def scripted_defaults(monkeypatch, tmp_path):
    """The README's clips in the working directory, and agents built with a scripted model and fake tools
    where the caller gives none (traces go to a database under tmp_path, as RAA_TRACES_PATH says)."""
    import graph.builder
    from graph.context import AgentTools
    from graph.testing import ScriptedChatModel
    from tools.motion import LKTracker

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAA_TRACES_PATH", str(tmp_path / "traces.sqlite"))
    for seed, name in enumerate(("clip.mp4", "a.mp4", "b.mp4")):
        moving_square(tmp_path / name, seed=seed)
    real = graph.builder.build_reward_agent

    def build(config=None, *, model=None, tools=None, **kwargs):
        return real(config, model=model or ScriptedChatModel(full_script()),
                    tools=tools or AgentTools(tracker=LKTracker(), surprise=FakeSurprise()), **kwargs)

    monkeypatch.setattr(graph.builder, "build_reward_agent", build)


def test_the_reward_agent_snippet_runs_as_written(scripted_defaults):
    from graph.schemas import RewardResult
    from graph.testing import ScriptedChatModel

    code = compile(python_block("## The reward agent"), "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = {"my_langchain_chat_model": ScriptedChatModel(full_script())}

    async def cell() -> None:  # a notebook cell: the code runs inside the event loop
        result = eval(code, namespace)  # noqa: S307 - the README's own code
        if asyncio.iscoroutine(result):
            await result

    asyncio.run(cell())
    res, results, out = namespace["res"], namespace["results"], namespace["out"]
    assert res.status == "scored" and res.reward is not None and res.run_id.startswith("run-")
    assert [r.status for r in results] == ["scored", "scored"]
    assert isinstance(out["result"], RewardResult) and out["result"].run_id == "run-1"
    assert out["result"].preset == "no_audit" and "audit" not in [s["node"] for s in out["steps"]]


def test_the_own_evidence_tools_snippet_uses_names_and_keywords_that_exist():
    import importlib
    import inspect

    tree = ast.parse(python_block("### Your own evidence tools"))
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            imported.update((alias.name, getattr(module, alias.name)) for alias in node.names)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    checked = [c for c in calls if c.func.id in imported]
    assert {c.func.id for c in checked} >= {"EvidenceReport", "Toolbox", "AgentConfig", "score_video"}
    for call in checked:
        params = inspect.signature(imported[call.func.id]).parameters
        unknown = {k.arg for k in call.keywords} - set(params)
        assert unknown == set(), f"README's {call.func.id}(...) passes {unknown}"


def test_the_snippets_durability_comment_names_every_accepted_value():
    """The comment listed "exit" or "async", while score_video / ascore_videos also take "sync" (TraceDurability)."""
    from typing import get_args

    from graph.settings import TraceDurability

    comment = next(line for line in python_block("## The reward agent").splitlines() if "durability=" in line)
    assert set(re.findall(r'"(\w+)"', comment)) == set(get_args(TraceDurability)), comment


def test_each_error_the_agent_snippet_says_a_call_raises_is_named_by_where_it_is_imported_from():
    """The comments said "raises ThreadInUseError" / "ResumeMismatchError" without a module, when `graph` did not
    export them yet (it now does, lazily: `from graph import ResumeMismatchError`): a reader who wrote `except
    ThreadInUseError` had nothing to import it from. The snippet names each error by a module that defines it."""
    import importlib

    block = python_block("## The reward agent")
    errors = set(re.findall(r"\b([A-Z]\w*Error)\b", block))
    assert {"ThreadInUseError", "ResumeMismatchError"} <= errors
    for error in errors:
        paths = re.findall(rf"\b((?:graph|tools)(?:\.\w+)+)\.{error}\b", block)
        assert paths, f"README's agent snippet names {error} without its module"
        assert all(getattr(importlib.import_module(p), error, None) is not None for p in paths), (error, paths)


def test_the_score_batch_manifest_example_is_a_manifest_line_and_the_row_fields_exist(tmp_path):
    """The CLI section's manifest line reads as a good item (its extra field kept), and the row fields it
    names are the ones `graph.batch` writes."""
    import json

    from graph.batch import ROW_FIELDS, read_manifest

    text = README.read_text()
    section = text[text.index("### CLI and tracing\n"):text.index("## Evaluating rewards")]
    example = re.search(r"e\.g\. `(\{\"path\".*?\})`", section).group(1)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(example + "\n")
    (item,) = read_manifest(manifest, "full")
    assert item["error"] is None and item["manifest"] == {"id": json.loads(example)["id"]}
    named = set(re.findall(r"`(\w+)`", section[section.index("Each output row"):section.index("`score-batch` appends")]))
    assert {"path", "instruction", "line", "manifest", "preset", "draw"} <= named & set(ROW_FIELDS)
    assert {"scorer", "result"} <= named


def test_every_inline_agent_config_of_the_readme_builds():
    """Each `AgentConfig(...)` the README's prose shows (a draw `k` taken as 1) is a valid config: a renamed
    field or a value it no longer accepts would fail here, not in a newcomer's notebook."""
    from graph import AgentConfig

    spans = [m.group(0) for span in re.findall(r"`([^`]*)`", README.read_text())
             for m in re.finditer(r"AgentConfig\([^()]*\)", span)]
    assert len(spans) >= 4  # the parser found them
    for span in spans:
        assert isinstance(eval(span, {"AgentConfig": AgentConfig, "k": 1}), AgentConfig), span  # noqa: S307


_MISSING = object()


def test_every_dotted_project_name_and_file_the_readme_names_exists():
    """`graph.tracing.read_trace`, `tools.toolbox.Toolbox`, `graph/gate.py` ...: each project module, attribute
    and file the README points a reader at is there (a rename left the README pointing at nothing)."""
    import importlib

    text = README.read_text()
    root = README.parent
    names = set(re.findall(r"`((?:graph|tools|training|evals|policy)(?:\.[A-Za-z_]\w*)+)", text))
    files = set(re.findall(r"`((?:graph|tools|training|evals|policy|benchmarks|tests|prompts)/[\w/.-]*\.py)`", text))
    assert len(names) > 15 and len(files) > 5  # the parser found them
    missing = [f for f in files if not (root / f).is_file()]
    for name in sorted(names):
        parts, obj = name.split("."), None
        for depth in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:depth]))
                break
            except ModuleNotFoundError:
                continue
        for part in parts[depth:]:
            obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            missing.append(name)
    assert missing == [], f"README names what does not exist: {missing}"


def test_the_preset_table_names_the_fourteen_presets_in_the_configs_order():
    """The README's **Presets** table (cumulative rows, then the `no_*` removals) is `graph.config.PRESETS`."""
    from graph.config import PRESETS

    text = README.read_text()
    table = text[text.index("| preset | modules |"):text.index("Only `full` and the `no_*` presets")]
    named = [name for row in table.splitlines()[2:] if row.startswith("|") for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    assert named == list(PRESETS)


def test_the_agent_config_defaults_the_readme_states_are_the_dataclass_defaults():
    """"Other `AgentConfig` fields: ... `max_tool_rounds` (4), `frame_budget` (48 ...)": each `field` (N) there
    is that field's default."""
    from dataclasses import fields

    from graph import AgentConfig

    text = README.read_text()
    paragraph = text[text.index("Other `AgentConfig` fields:"):text.index("Frame and tool work runs")]
    stated = {name: int(value) for name, value in re.findall(r"`(\w+)` \((\d+)", paragraph)}
    defaults = {f.name: f.default for f in fields(AgentConfig)}
    assert len(stated) >= 5 and {name: defaults.get(name) for name in stated} == stated


def test_the_clip_suite_section_lists_every_option_of_raa_demo():
    """"`raa demo` takes `--out` ..., `--seed`, `--limit` and `--concurrency`" left out `--preset`, which the Quick
    start uses (`raa demo --preset no_wmreward`): the sentence names each option the command has."""
    import typer

    from graph.cli import app

    demo = typer.main.get_command(app).commands["demo"]
    text = README.read_text()
    start = text.index("`raa demo` takes")
    sentence = text[start:text.index(". ", start)]
    listed = set(re.findall(r"`(--[a-z-]+)`", sentence))
    options = {opt for param in demo.params for opt in param.opts if opt != "--help"}
    assert listed == options, sentence


def test_the_policy_snippet_runs_on_the_tiny_model():
    """"Policy and DynDiff sampler"'s block, with the tiny model its comment offers in place of the checkpoint
    on a GPU, and 9 frames instead of 93 (CPU): a renamed function, field or return value fails here."""
    import numpy as np

    code = python_block("## Policy and DynDiff sampler (`policy/`)")
    real = re.search(r'FlowWorldModel\.from_pretrained\([^\n]*?\.to\("cuda"\)', code).group(0)
    assert "# or FlowWorldModel.tiny_cosmos()" in code and "num_frames=93" in code, "update the substitutions"
    code = code.replace(real, "FlowWorldModel.tiny_cosmos()").replace("num_frames=93", "num_frames=9")
    namespace = {"first_frames_uint8": np.random.default_rng(0).integers(0, 256, (1, 16, 16, 3), dtype=np.uint8),
                 "texts": ["push the red block to the left"]}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    videos, log_prob, flips = namespace["videos"], namespace["log_prob"], namespace["flips"]
    assert videos.dtype == np.uint8 and videos.shape == (8, 9, 16, 16, 3)  # G=8 rollouts of one prompt
    assert tuple(log_prob.shape) == (8,) and tuple(flips.shape) == (8,)
    assert namespace["mean"].shape == namespace["ro"].steps[0].x_next.shape  # [B, C, F, H, W]


def _training_lines(text: str) -> list[tuple[str, str]]:
    """(module, arguments) of each `python -m training.X ...` / `-m training.X` / `--module training.X` command of
    the README: in bash blocks (continuation lines joined, comments cut) and in inline code spans."""
    command = re.compile(r"(?:-m|--module) training\.(\w+)((?:[ \t]+[^\s`#;|]+)*)")
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            lines += command.findall(line.split("#", 1)[0])
    for span in re.findall(r"(?<!`)`([^`\n]*training\.[^`\n]*)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.S)):
        lines += command.findall(span)
    return lines


def test_every_training_command_of_the_readme_names_a_module_and_its_flags(capsys):
    """`python -m training.generate --policy ... --samples 4`, `training.report --run ... --out`, the launches'
    `--config`, `--check`, `--resume` and field overrides: each flag is one the module's `--help` lists (the
    `raa` lines have their own test in test_readme_settings.py)."""
    import importlib

    lines = _training_lines(README.read_text())
    assert {module for module, _ in lines} >= {"train", "generate", "export", "report", "reshard"}
    helps: dict[str, set[str]] = {}
    for module, args in lines:
        if module not in helps:
            try:  # argparse exits after its help; training.train prints its own and returns 0
                status = importlib.import_module(f"training.{module}").main(["--help"])
            except SystemExit as stop:
                status = stop.code
            assert status in (0, None), module
            helps[module] = {"--help", *re.findall(r"(?<![\w-])(--[a-z][a-z_-]*)", capsys.readouterr().out)}
        unknown = [flag for flag in re.findall(r"(?<![\w-])(--[a-z][a-z_-]*)", args) if flag not in helps[module]]
        assert unknown == [], f"README: training.{module}{args}: no {unknown}"
