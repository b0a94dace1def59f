"""Videos from an exported policy (training/generate.py): manifest, pairing, determinism, resume, failures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from graph.batch import read_manifest
from tools.video import read_all_frames
from training.config import PromptSpec
from training.config_io import load_config
from training.data import SAMPLE_NOISE, sample_seed
from training.engine import set_full_finetune
from training.export_folder import save_policy
from training.generate import GenerateError, generate, main
from training.models import build_world_model

SMOKE = Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml"
PROMPTS = [PromptSpec("push the red block to the left", image_seed=1), PromptSpec("open the drawer", image_seed=3)]


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    """An export of the smoke model with changed (\"trained\") transformer weights."""
    cfg = load_config(SMOKE, ["--num_steps", "3", "--sde_window", "[0, 2]"])
    model = build_world_model(cfg, "cpu")
    set_full_finetune(model)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.transformer.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return save_policy(model, cfg, tmp_path_factory.mktemp("export") / "final", iteration=30, source="unit")


def _frames(out: Path, key: str) -> np.ndarray:
    return read_all_frames(out / "videos" / f"{key}.mp4")


@pytest.mark.slow
def test_manifest_feeds_score_batch_and_pairs_trained_with_base(policy, tmp_path):
    trained = generate(policy, tmp_path / "trained", prompts=PROMPTS, samples=2)
    base = generate(policy, tmp_path / "base", prompts=PROMPTS, samples=2, weights="base")
    assert (trained.written, base.written, trained.failed) == (4, 4, [])
    rows = [json.loads(line) for line in trained.manifest.read_text().splitlines()]
    assert [r["key"] for r in rows] == ["p0000_s00", "p0000_s01", "p0001_s00", "p0001_s01"]
    assert {r["weights"] for r in rows} == {"trained"} and {r["iteration"] for r in rows} == {30}
    items = read_manifest(trained.manifest, "full")  # what `raa score-batch` reads
    assert [i["error"] for i in items] == [None] * 4
    assert all(Path(i["path"]).is_file() for i in items)
    assert [i["instruction"] for i in items] == [p.text for p in PROMPTS for _ in range(2)]
    base_rows = [json.loads(line) for line in base.manifest.read_text().splitlines()]
    assert [r["seed"] for r in base_rows] == [r["seed"] for r in rows]  # same noise for each pair
    assert len({r["seed"] for r in rows}) == 4
    # the held-out evaluation's seeds (training/evaluate.py): `generate --seed SEED` reproduces its items
    assert [r["seed"] for r in rows] == [sample_seed(0, i, j) for i in range(2) for j in range(2)]
    assert json.loads((trained.out / "generate.json").read_text())["noise"] == SAMPLE_NOISE
    clip = _frames(trained.out, "p0000_s00")
    assert clip.shape == (9, 32, 32, 3)
    assert np.abs(clip.astype(int) - _frames(base.out, "p0000_s00").astype(int)).mean() > 1.0  # weights matter
    assert np.abs(clip.astype(int) - _frames(trained.out, "p0000_s01").astype(int)).mean() > 1.0  # noise matters


@pytest.mark.slow
def test_same_settings_give_the_same_videos_and_a_rerun_resumes(policy, tmp_path):
    first = generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=2)
    again = generate(policy, tmp_path / "b", prompts=PROMPTS[:1], samples=2)
    assert np.array_equal(_frames(first.out, "p0000_s01"), _frames(again.out, "p0000_s01"))
    (first.out / "videos" / "p0000_s01.mp4").unlink()  # as if the run had stopped before this video
    resumed = generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=2)
    assert (resumed.written, resumed.skipped) == (1, 1)
    assert np.array_equal(_frames(first.out, "p0000_s01"), _frames(again.out, "p0000_s01"))
    with pytest.raises(GenerateError, match=r"other settings \(differing: \['seed'\]\)"):
        generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=2, seed=5)
    with pytest.raises(GenerateError, match="prompts_sha256"):  # the same keys would name other prompts
        generate(policy, tmp_path / "a", prompts=PROMPTS[1:], samples=2)


@pytest.mark.slow
def test_a_rerun_drops_a_torn_manifest_line(policy, tmp_path):
    first = generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=1)
    with first.manifest.open("a") as fh:
        fh.write('{"path": "videos/p0000_s01.mp4", "instr')  # killed mid-write
    again = generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=2)
    assert (again.written, again.skipped) == (1, 1)
    items = read_manifest(first.manifest, "full")  # what raa score-batch will read: no broken line
    assert [(Path(i["path"]).name, i["error"]) for i in items] == [("p0000_s00.mp4", None), ("p0000_s01.mp4", None)]


def test_dyndiff_sampler_explores_and_checks_its_window(policy, tmp_path):
    ode = generate(policy, tmp_path / "ode", prompts=PROMPTS[:1])
    sde = generate(policy, tmp_path / "sde", prompts=PROMPTS[:1], sampler="dyndiff")
    assert sde.written == 1
    assert not np.array_equal(_frames(ode.out, "p0000_s00"), _frames(sde.out, "p0000_s00"))
    with pytest.raises(GenerateError, match="sde_window"):
        generate(policy, tmp_path / "short", prompts=PROMPTS[:1], sampler="dyndiff", num_steps=1)


def test_a_bad_prompt_fails_alone(policy, tmp_path):
    prompts = [PROMPTS[0], PromptSpec("lift the cup", image=str(tmp_path / "missing.png")), PROMPTS[1]]
    summary = generate(policy, tmp_path / "out", prompts=prompts, samples=1)
    assert summary.written == 2
    assert [(f["key"], f["prompt"]) for f in summary.failed] == [("p0001_s00", 1)]
    assert "missing.png" in summary.failed[0]["reason"]
    failed = [json.loads(line) for line in (summary.out / "failed.jsonl").read_text().splitlines()]
    assert failed == summary.failed
    assert [r["prompt"] for r in map(json.loads, summary.manifest.read_text().splitlines())] == [0, 2]


def test_cli_exit_codes(policy, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"text": "stack the blocks", "image_seed": 4}) + "\n"
                       + json.dumps({"text": "pick up the cup", "image": "nowhere.png"}) + "\n")
    assert main(["--policy", str(policy), "--out", str(tmp_path / "cli"), "--prompts", str(prompts),
                 "--device", "cpu"]) == 1
    out = capsys.readouterr()
    assert "1 video(s) written" in out.out and "raa score-batch" in out.out and "nowhere.png" in out.err
    assert main(["--policy", str(tmp_path), "--out", str(tmp_path / "x"), "--device", "cpu"]) == 2
    assert "not a policy export" in capsys.readouterr().err
    assert main(["--policy", str(policy), "--out", str(tmp_path / "y"), "--samples", "0"]) == 2
    if not torch.cuda.is_available():
        assert main(["--policy", str(policy), "--out", str(tmp_path / "z"), "--device", "cuda"]) == 2
        assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize(("rows", "message"), [
    ('{"text": "ok", "image": 5}\n', "p.jsonl:1: 'image' must be a file path (a non-empty string) or null, got 5"),
    ('{"text": 7}\n', "p.jsonl:1: 'text' must be a non-empty string, got 7"),
    ("", "no training prompts: "),
])
def test_a_mistyped_prompt_file_is_a_usage_error(policy, tmp_path, capsys, rows, message):
    """A numeric image was a TypeError traceback (exit 1, which means "some videos failed")."""
    (tmp_path / "p.jsonl").write_text(rows)
    assert main(["--policy", str(policy), "--out", str(tmp_path / "out"), "--prompts", str(tmp_path / "p.jsonl"),
                 "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and str(tmp_path / "p.jsonl") in err
    assert not (tmp_path / "out").exists()


def test_a_negative_seed_is_refused_before_anything_loads_or_is_written(policy, tmp_path, capsys, monkeypatch):
    """It failed after the model loaded and generate.json was written, with numpy's message not naming --seed."""
    import training.generate as gen

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(gen, "load_policy", no_load)
    assert main(["--policy", str(policy), "--out", str(tmp_path / "out"), "--seed", "-1", "--device", "cpu"]) == 2
    assert "error: seed (--seed) must be a non-negative integer, got -1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_prompt_fields_flow_into_a_manifest_the_vqa_eval_reads(policy, tmp_path):
    """PAI-Bench-style: prompts carry a task and yes/no questions; the generated videos' manifest is a
    `raa eval world-model` manifest."""
    from evals.vqa import load_vqa_manifest
    from training.data import load_prompts

    questions = [{"question": "Does the gripper close on the red block?", "answer": "yes"}]
    file = tmp_path / "pai.jsonl"
    file.write_text(json.dumps({"text": "pick up the red block", "image_seed": 2, "task": "pick_place",
                                "questions": questions, "path": "ignored.mp4"}) + "\n")
    prompts = load_prompts([], str(file))
    assert prompts[0].meta == {"task": "pick_place", "questions": questions, "path": "ignored.mp4"}
    done = generate(policy, tmp_path / "out", prompts=prompts, samples=2)
    row = json.loads(done.manifest.read_text().splitlines()[0])
    assert row["path"] == "videos/p0000_s00.mp4" and row["questions"] == questions  # generate's own fields win
    items = load_vqa_manifest(done.manifest)
    assert [(Path(i.path).name, i.task, len(i.questions)) for i in items] == [("p0000_s00.mp4", "pick_place", 1),
                                                                              ("p0000_s01.mp4", "pick_place", 1)]


def test_guidance_can_be_set_per_call(policy, tmp_path):
    plain = generate(policy, tmp_path / "plain", prompts=PROMPTS[:1])
    guided = generate(policy, tmp_path / "guided", prompts=PROMPTS[:1], guidance_scale=3.0, negative_prompt="blurry")
    assert json.loads((guided.out / "generate.json").read_text())["negative_prompt"] == "blurry"
    assert json.loads((plain.out / "generate.json").read_text())["negative_prompt"] is None  # w = 1: not encoded
    assert np.abs(_frames(plain.out, "p0000_s00").astype(int) - _frames(guided.out, "p0000_s00").astype(int)).mean() > 1
    with pytest.raises(GenerateError, match="guidance_scale must be >= 0"):
        generate(policy, tmp_path / "bad", prompts=PROMPTS[:1], guidance_scale=-2.0)


@pytest.mark.slow
def test_batched_ode_samples_match_one_at_a_time(policy, tmp_path, monkeypatch):
    """Each video keeps its own noise in a batch: the same frames as batch 1, up to a rounding step.

    generate() is compared on the frames it hands the encoder, per manifest row, not on the MP4s read
    back: the batched transformer rounds differently (latents differ by ~1e-6), which may move a pixel
    by one step, and libx264 turns a one-step change of one input pixel into differences of up to ~14
    after decoding (6 of 120 single-pixel changes of these clips; it depends on where the change lands),
    so an MP4 bound failed whenever the rounding happened to move a pixel."""
    import training.generate as gen
    from training.data import load_frame
    from training.export import load_policy
    from training.generate import sample_video, sample_videos

    model, _, cfg = load_policy(policy, "cpu")

    image = load_frame(PROMPTS[0], cfg.height, cfg.width)
    with torch.no_grad():
        cond = model.encode_prompts(image[None], [PROMPTS[0].text], num_frames=cfg.num_frames)
    seeds = [11, 12, 13]
    batched = sample_videos(model, cond, cfg.num_steps, cfg.shift, seeds)
    single = [sample_video(model, cond, "ode", None, cfg.num_steps, cfg.shift, s) for s in seeds]
    for a, b in zip(batched, single, strict=True):
        assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 1
    assert np.abs(batched[0].astype(int) - batched[1].astype(int)).mean() > 1.0  # different noise per video

    encoded: list[np.ndarray] = []  # every clip generate() writes, in write order (= manifest row order)
    real_write = gen.write_video
    monkeypatch.setattr(gen, "write_video", lambda path, frames, **kw: encoded.append(np.array(frames))
                        or real_write(path, frames, **kw))
    one = generate(policy, tmp_path / "one", prompts=PROMPTS, samples=3)
    one_clips, encoded[:] = encoded[:], []
    three = generate(policy, tmp_path / "three", prompts=PROMPTS, samples=3, batch_size=2)  # chunks of 2 and 1
    assert one.written == three.written == 6 and one.failed == three.failed == []
    assert one.manifest.read_text() == three.manifest.read_text()  # same keys, seeds, order
    for a, b in zip(one_clips, encoded, strict=True):
        assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 1
    assert np.abs(one_clips[0].astype(int) - one_clips[1].astype(int)).mean() > 1.0  # not one clip written twice
    assert np.abs(_frames(three.out, "p0001_s01").astype(int) - encoded[4].astype(int)).mean() < 2.0  # on disk
    with pytest.raises(GenerateError, match="1 with the dyndiff sampler"):
        generate(policy, tmp_path / "dd", prompts=PROMPTS, sampler="dyndiff", batch_size=2)


def test_every_prompt_is_encoded_before_sampling_and_the_encoder_leaves_the_device(policy, tmp_path, monkeypatch):
    """Sampling never needs the text encoder: all prompts are encoded first, then it moves to host memory
    (10-15 GB of a full-size model's device memory back for sampling and decoding)."""
    import training.generate as gen

    events: list[str] = []
    real_load, real_encode, real_sample = gen.load_policy, gen.encode_prompt, gen.sample_videos

    def load(*args, **kwargs):
        model, info, cfg = real_load(*args, **kwargs)
        encoder_to = model.text_encoder.to
        model.text_encoder.to = lambda *a, **k: events.append(f"encoder to {k.get('device', a[0] if a else '')}") \
            or encoder_to(*a, **k)
        return model, info, cfg

    monkeypatch.setattr(gen, "load_policy", load)
    monkeypatch.setattr(gen, "encode_prompt", lambda m, c, spec, neg: events.append(f"encode {spec.text}")
                        or real_encode(m, c, spec, neg))
    monkeypatch.setattr(gen, "sample_videos", lambda *a, **k: events.append("sample") or real_sample(*a, **k))
    summary = generate(policy, tmp_path / "out", prompts=PROMPTS, samples=2)
    assert summary.written == 4 and not summary.failed
    assert events == [f"encode {PROMPTS[0].text}", f"encode {PROMPTS[1].text}", "encoder to cpu",
                      "sample", "sample", "sample", "sample"]
    events.clear()
    assert generate(policy, tmp_path / "out", prompts=PROMPTS, samples=2).skipped == 4  # nothing left to do
    assert events == ["encoder to cpu"]  # a rerun encodes only prompts with videos still to write


def test_a_rerun_refuses_another_export_in_the_same_policy_folder(policy, tmp_path):
    """The settings knew the policy only by its folder and iteration: another checkpoint of the same iteration
    (another run's, or one saved again after a resume) exported into that folder passed the resume check, and
    the manifest went on with videos of the other policy."""
    import shutil

    mine = shutil.copytree(policy, tmp_path / "final")
    first = generate(mine, tmp_path / "out", prompts=PROMPTS[:1], samples=1)
    assert first.written == 1
    cfg = load_config(SMOKE, ["--num_steps", "3", "--sde_window", "[0, 2]"])
    save_policy(build_world_model(cfg, "cpu"), cfg, mine, iteration=30, source="/runs/other/checkpoints/iter_000030")
    with pytest.raises(GenerateError, match=r"other settings \(differing: \[.*'source'\]\)"):
        generate(mine, tmp_path / "out", prompts=PROMPTS[:1], samples=2)
    info = json.loads((mine / "export.json").read_text())  # the same checkpoint path, exported again later
    (mine / "export.json").write_text(json.dumps({**info, "source": "unit", "created": "2099-01-01T00:00:00+0000"}))
    with pytest.raises(GenerateError, match=r"other settings \(differing: \['created'\]\)"):
        generate(mine, tmp_path / "out", prompts=PROMPTS[:1], samples=2)
    assert len(first.manifest.read_text().splitlines()) == 1  # nothing of the other policy was added


def test_a_rerun_refuses_prompts_whose_extra_fields_changed(policy, tmp_path):
    """The prompts' digest covered text, image and image_seed only: a rerun after editing a prompt's VQA
    questions appended rows with the new questions to a manifest holding rows with the old ones."""
    import hashlib

    asked = [PromptSpec("open the drawer", image_seed=3, meta={"questions": [{"question": "Open?", "answer": "yes"}]})]
    generate(policy, tmp_path / "out", prompts=asked, samples=1)
    edited = [PromptSpec("open the drawer", image_seed=3, meta={"questions": [{"question": "Shut?", "answer": "no"}]})]
    with pytest.raises(GenerateError, match="prompts_sha256"):
        generate(policy, tmp_path / "out", prompts=edited, samples=2)
    reordered = [PromptSpec("open the drawer", image_seed=3, meta={"b": 1, "a": 2})]
    generate(policy, tmp_path / "keys", prompts=reordered, samples=1)
    assert generate(policy, tmp_path / "keys", prompts=[PromptSpec("open the drawer", image_seed=3,
                                                                   meta={"a": 2, "b": 1})], samples=1).skipped == 1
    # prompts without extra fields keep the digest older folders were made with (they still resume)
    generate(policy, tmp_path / "plain", prompts=PROMPTS[:1], samples=1)
    old = hashlib.sha256(json.dumps([[p.text, p.image, p.image_seed] for p in PROMPTS[:1]]).encode()).hexdigest()
    assert json.loads((tmp_path / "plain" / "generate.json").read_text())["prompts_sha256"] == old


def test_a_crash_while_claiming_the_folder_leaves_it_usable(policy, tmp_path, monkeypatch):
    """generate.json was written in place: a full disk (or a kill) left it cut, and every later call refused
    the folder as made "with other settings" (differing: every key), though it held no video."""
    from tests.disk_faults import half_then_full_disk

    with monkeypatch.context() as patch:
        patch.setattr(Path, "write_text", half_then_full_disk)
        with pytest.raises(OSError, match="No space left"):
            generate(policy, tmp_path / "out", prompts=PROMPTS[:1], samples=1)
    assert not (tmp_path / "out" / "generate.json").exists()  # no cut file left behind
    assert generate(policy, tmp_path / "out", prompts=PROMPTS[:1], samples=1).written == 1


def test_cli_names_an_out_that_is_a_file(policy, tmp_path, capsys):
    """--out naming an existing file: mkdir's FileExistsError was an OSError traceback, not a usage error."""
    (tmp_path / "taken").write_text("x")
    assert main(["--policy", str(policy), "--out", str(tmp_path / "taken"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(tmp_path / "taken") in err
    assert (tmp_path / "taken").read_text() == "x"


def test_a_rerun_closes_a_last_row_cut_just_before_its_newline(policy, tmp_path):
    """A row cut right before its newline is whole JSON, so the rerun kept it as it was, and the next row was
    glued onto it: one line holding two objects, which raa score-batch cannot read."""
    first = generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=1)
    first.manifest.write_text(first.manifest.read_text().rstrip("\n"))  # killed before the "\n"
    generate(policy, tmp_path / "a", prompts=PROMPTS[:1], samples=2)
    rows = [json.loads(line) for line in first.manifest.read_text().splitlines()]
    assert [r["key"] for r in rows] == ["p0000_s00", "p0000_s01"]


def test_a_refused_rerun_says_what_changed_and_that_the_policy_was_exported_again(tmp_path):
    """Following the README, the smoke run is trained again (a second launch, `--overwrite_output_dir`) and
    `training.generate --out out/trained` run once more: it was refused with "differing: ['created']" only, naming
    an export.json field without its values nor saying that the policy folder now holds another export."""
    from training.generate_folder import claim_folder

    settings = {"policy": "/runs/smoke/final", "iteration": 30, "created": "2026-12-05T01:25:17+0000", "seed": 0}
    claim_folder(tmp_path, settings)
    (tmp_path / "manifest.jsonl").write_text('{"key": "p0000_s00"}\n')  # its videos
    with pytest.raises(GenerateError) as err:
        claim_folder(tmp_path, {**settings, "created": "2026-12-05T01:35:10+0000", "seed": 3})
    text = str(err.value)
    assert "differing: ['created', 'seed']" in text  # the list the older tests match stays
    assert "created '2026-12-05T01:25:17+0000' -> '2026-12-05T01:35:10+0000'" in text and "seed 0 -> 3" in text
    assert "/runs/smoke/final was exported again" in text and "choose another --out" in text


def test_an_export_without_a_shift_is_refused_before_the_folder_is_claimed(policy, tmp_path):
    """A saved config holding ``shift: null`` (by hand) read as None: every video then failed alone on a
    TypeError inside the sampler, after generate.json recorded shift None."""
    import shutil

    mine = shutil.copytree(policy, tmp_path / "final")
    info = json.loads((mine / "export.json").read_text())
    (mine / "export.json").write_text(json.dumps({**info, "config": {**info["config"], "shift": None}}))
    with pytest.raises(GenerateError, match="export.json config: shift is unset"):
        generate(mine, tmp_path / "out", prompts=PROMPTS[:1], samples=1)
    assert not (tmp_path / "out" / "generate.json").exists()
