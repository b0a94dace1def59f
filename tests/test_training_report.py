"""training/report.py: the HTML report of a training run, from a synthetic output folder (resumed
iterations, a torn line, saved and missing held-out videos); the page in headless Chromium (marked
`browser`). A real smoke run's report is checked in tests/test_train_e2e.py (slow)."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tools.video import write_video
from training.engine import mark_latest
from training.report import (
    _columns,
    frame_strip,
    main,
    read_run,
    render_training_report,
    steps_per_iteration,
    write_training_report,
)
from training.resume import StateLayout, write_layout

COLOURS = [(250, 0, 0), (0, 250, 0), (0, 0, 250), (250, 250, 0)]


def _clip(path: Path) -> Path:
    frames = np.stack([np.full((32, 48, 3), c, np.uint8) for c in COLOURS for _ in range(3)])
    return write_video(path, frames, fps=8.0)


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _lines(path: Path, rows: list, torn: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + torn)


@pytest.fixture
def run(tmp_path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump({"backend": "wan", "model_path": "/models/wan", "finetune": "lora",
                                                     "reward": "agent", "reward_options": {"preset": "full"},
                                                     "max_iterations": 50}))
    (out / "reward_backbone.json").write_text(json.dumps({"model": "vlm-7b", "base_url": "http://gpu:8000/v1"}))
    metrics = [{"iteration": i, "reward_mean": 0.1 * i, "reward_T_mean": 0.05 * i, "grad_norm": 2.0, "lr": 1e-4,
                "reward_usage_calls": 40} for i in (1, 2, 3)]
    metrics.append({"iteration": 3, "reward_mean": 0.9, "reward_T_mean": 0.5, "grad_norm": None, "lr": 1e-4})  # resumed
    _lines(out / "metrics.jsonl", metrics, torn='{"iteration": 4, "rew')
    _lines(out / "eval.jsonl", [{"iteration": 0, "eval_reward_mean": 0.2}, {"iteration": 2, "eval_reward_mean": 0.7},
                                {"iteration": 3, "eval_reward_mean": 0.4}])
    for it in (0, 2):  # complete checkpoints (layout.json, `latest`), as the trainer leaves them
        write_layout(_mkdir(out / "checkpoints" / f"iter_{it:06d}"), StateLayout(2, "float32"))
    mark_latest(out / "checkpoints", 2)
    _clip(out / "eval_videos" / "iter_000002" / "p000_s00.mp4")
    items = [{"iteration": it, "prompt": 0, "sample": 0, "text": "open the <drawer>", "reward": r, "reason": None,
              "run_id": None, "video": f"eval_videos/iter_{it:06d}/p000_s00.mp4", "components": {"T": r, "failure": 0}}
             for it, r in ((0, 0.2), (2, 0.7), (3, 0.4))]
    items.append({"iteration": 2, "prompt": 1, "sample": 0, "text": "stack", "reward": None, "reason": "observe: timeout",
                  "run_id": "r1", "video": None})
    _lines(out / "eval_rewards.jsonl", items)
    _clip(out / "rollout_videos" / "iter_000002" / "r0_g0_s00.mp4")
    _lines(out / "rewards.jsonl", [
        {"iteration": 1, "rank": 0, "group": 0, "sample": 0, "prompt": "old", "reward": 0.1, "run_id": None,
         "advantage": 1.0, "video": "rollout_videos/iter_000001/r0_g0_s00.mp4"},
        {"iteration": 2, "rank": 0, "group": 0, "sample": 1, "prompt": "push", "reward": 0.2, "run_id": None,
         "advantage": -0.5, "video": "rollout_videos/iter_000002/r0_g0_s01.mp4"},
        {"iteration": 2, "rank": 0, "group": 0, "sample": 0, "prompt": "push", "reward": 0.6, "run_id": None,
         "advantage": 0.5, "video": "rollout_videos/iter_000002/r0_g0_s00.mp4"},
        {"iteration": 3, "rank": 0, "group": 0, "sample": 0, "prompt": "push", "reward": 0.3, "run_id": None,
         "advantage": None}])  # iteration 3 saved no videos
    _lines(out / "ineligible.jsonl", [{"iteration": 1, "prompt": "a", "reason": "observe: timeout"}] * 3
           + [{"iteration": 2, "prompt": "b", "reason": "tool motion failed"}])
    return out


def test_report_reads_the_last_row_of_each_iteration_and_skips_torn_lines(run):
    files = read_run(run)
    assert [r["iteration"] for r in files.metrics] == [1, 2, 3] and files.metrics[-1]["reward_mean"] == 0.9
    assert files.skipped_lines == 1 and sorted(files.items) == [(0, 0), (1, 0)]
    html = render_training_report(run)
    for element in ("run-header", "curves", "curve-reward_mean", "curve-reward_T_mean", "curve-grad_norm",
                    "curve-reward_usage_calls",
                    "held-out", "held-out-curve", "held-out-table", "ineligible"):
        assert f'id="{element}"' in html, element
    assert "x=3 y=0.9000" in html and "x=3 y=0.3000" not in html  # the resumed row, not the crashed one
    assert "wan · /models/wan · lora" in html and "agent (preset full) · model vlm-7b" in html and "3 of 50" in html
    assert "iter_000002 (eval_reward_mean 0.7000)" in html  # best with a checkpoint; 3 has none
    assert "1 (not JSON" in html
    assert "open the &lt;drawer&gt;" in html and "<drawer>" not in html  # escaped
    assert "iteration 2 * (mean 0.700)" in html  # the best evaluation is starred
    assert html.split('id="held-out-table"')[1].split("</table>")[0].count('class="strip"') == 1  # iteration 2's
    held_out = html.split('id="held-out-table"')[1].split("</table>")[0]
    assert held_out.count("unreadable (VideoNotFoundError)") == 2  # iterations 0 and 3: no file
    assert "observe: timeout" in html and "T 0.70 failure 0.00" in html
    assert html.count('class="run"') == 1 and "raa report r1" in html  # the agent's trace of that sample
    rollouts = html.split('id="rollouts-table"')[1].split("</table>")[0]  # iteration 2: the latest saved
    assert "Training rollouts of iteration 2" in html and "old" not in rollouts
    assert rollouts.index("0.600") < rollouts.index("0.200")  # by sample
    assert "advantage 0.50" in rollouts and "advantage -0.50" in rollouts
    assert rollouts.count('class="strip"') == 1 and rollouts.count("unreadable") == 1  # s01's file is missing
    assert html.count('class="strip"') == 2  # with the held-out one
    counts = re.findall(r"<td>(\d+)</td><td>([^<]+)</td>", html.split('id="ineligible"')[1])
    assert counts == [("3", "observe: timeout"), ("1", "tool motion failed")]


def test_frame_strip_shows_uniform_frames_in_order(tmp_path):
    from PIL import Image

    url = frame_strip(_clip(tmp_path / "c.mp4"), 4)
    image = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))
    assert image.shape == (72, 4 * 108, 3)  # 48x32 frames at 72 px high, side by side
    centres = [image[36, 54 + 108 * k].astype(int) for k in range(4)]
    for got, want in zip(centres, COLOURS, strict=True):
        assert np.abs(got - np.array(want)).max() < 40, (got, want)


def test_long_series_are_thinned_to_evenly_spaced_points(tmp_path):
    from training.report import MAX_POINTS, metric_series

    rows = [{"iteration": i, "reward_mean": i / 3000} for i in range(1, 3001)]
    xs, ys = metric_series(rows, "reward_mean")
    assert len(xs) == MAX_POINTS and xs[0] == 1.0 and xs[-1] == 3000.0 and ys[-1] == 1.0
    assert max(np.diff(xs)) - min(np.diff(xs)) <= 1.0  # evenly spaced
    out = tmp_path / "long"
    out.mkdir()
    _lines(out / "metrics.jsonl", rows)
    assert render_training_report(out).count("<circle") == MAX_POINTS  # one chart: reward_mean


def test_columns_keep_first_best_and_last():
    assert _columns([0, 10, 20], 10, 6) == [0, 10, 20]
    its = list(range(0, 110, 10))
    picked = _columns(its, 30, 4)
    assert len(picked) == 4 and {0, 30, 100} <= set(picked) and picked == sorted(picked)
    assert _columns(its, None, 2) == [0, 100]
    assert _columns(its, 30, 2) == [30, 100]  # at most 2: the best and the last, not first, best and last
    assert _columns(its, 0, 2) == [0, 100] and _columns(its, 100, 2) == [0, 100]


def test_cli_writes_the_page_and_names_a_wrong_folder(run, tmp_path, capsys):
    assert main(["--run", str(run)]) == 0
    assert (run / "report.html").is_file() and str(run / "report.html") in capsys.readouterr().out
    assert main(["--run", str(tmp_path / "nope")]) == 2
    assert "not a training output_dir" in capsys.readouterr().err
    assert main(["--run", str(run), "--columns", "1"]) == 2


def test_a_run_without_held_out_evaluation_still_renders(tmp_path):
    out = tmp_path / "plain"
    out.mkdir()
    _lines(out / "metrics.jsonl", [{"iteration": 1, "reward_mean": 0.5}])
    html = write_training_report(out, tmp_path / "x" / "r.html").read_text()
    assert "no held-out evaluation" in html and 'id="held-out-table"' not in html and "none" in html
    assert "none saved (rollout_videos_every)" in html
    (out / "config.yaml").write_text("backend: [unclosed")
    assert "? · ? · ?" in render_training_report(out)  # an unreadable config: the page still renders


def test_on_policy_kl_charts_say_they_are_zero_by_construction(tmp_path):
    out = tmp_path / "onpolicy"
    out.mkdir()
    _lines(out / "metrics.jsonl", [{"iteration": i, "reward_mean": 0.5, "approx_kl": 0.0, "clip_fraction": 0.0,
                                    "mu_kl": 0.1} for i in (1, 2)])
    assert steps_per_iteration({}) is None and "by construction" not in render_training_report(out)  # no config
    (out / "config.yaml").write_text(yaml.safe_dump({"backend": "cosmos", "beta": 0.01}))  # defaults: 1 x 1
    html = render_training_report(out)
    notes = [c.split("</div>")[0] for c in html.split("<div><b>")[1:] if "by construction" in c]
    assert [n.split("</b>")[0] for n in notes] == ["approx_kl", "clip_fraction"]
    (out / "config.yaml").write_text(yaml.safe_dump({"inner_epochs": 2, "optimizer_steps_per_epoch": 2}))
    assert steps_per_iteration(read_run(out).config) == 4 and "by construction" not in render_training_report(out)
    assert steps_per_iteration({"inner_epochs": "2"}) is None


@pytest.mark.browser
def test_training_report_renders_in_headless_chromium(run, tmp_path):
    from PIL import Image

    from tests.launches import launch

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed")
    page = write_training_report(run)
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    shot = tmp_path / "report.png"
    # under tests.launches.launch: past subprocess.run's timeout (which killed the browser process alone) its
    # zygote, renderer and GPU processes lived on, holding the output pipes run then read for ever
    launch([*base, f"--screenshot={shot}", page.resolve().as_uri()], timeout=120, what="headless chromium")
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.std() > 10.0, "blank-looking screenshot"
    dom = launch([*base, "--dump-dom", page.resolve().as_uri()], timeout=120, what="headless chromium").stdout
    assert all(f'id="{i}"' in dom for i in ("run-header", "curve-reward_T_mean", "held-out-table", "rollouts-table",
                                            "ineligible"))
    assert dom.count('class="strip"') == 2


def test_run_labels_take_parent_folders_until_distinct(tmp_path):
    """Two sweeps with the same inner folders got the same label (only one parent was added)."""
    from training.compare_runs import run_labels

    a, b, c = tmp_path / "sweepA" / "lr1e-4" / "run", tmp_path / "sweepB" / "lr1e-4" / "run", tmp_path / "solo"
    assert run_labels([a, b, c]) == ["sweepA/lr1e-4/run", "sweepB/lr1e-4/run", "solo"]
    assert run_labels([tmp_path / "x" / "run", tmp_path / "run"])[0].endswith("x/run")
    with pytest.raises(ValueError, match="is given twice"):
        run_labels([a, a.parent / ".." / "lr1e-4" / "run"])


def test_runs_compare_on_one_page(run, tmp_path, capsys):
    """Two runs: a table row each, a line per run in every chart a run has data for, the held-out means."""
    from training.compare_runs import render_comparison, run_labels

    other = tmp_path / "other" / "run"  # the same folder name as `run`: labels take the parent too
    other.mkdir(parents=True)
    _lines(other / "metrics.jsonl", [{"iteration": i, "reward_mean": 0.2 * i, "approx_kl": 0.01} for i in (1, 2)])
    _lines(other / "eval.jsonl", [{"iteration": 0, "eval_reward_mean": 0.3}])
    labels = run_labels([run, other])
    assert labels == [f"{run.parent.name}/run", "other/run"]
    html = render_comparison([run, other])
    for element in ("runs", "curves", "compare-reward_mean", "compare-reward_T_mean", "compare-approx_kl",
                    "held-out-compare"):
        assert f'id="{element}"' in html, element
    charts = {m.group(1): m.group(2) for m in re.finditer(r'<svg id="(compare-[^"]+|held-out-compare)"(.*?)</svg>', html)}
    assert charts["compare-reward_mean"].count('class="series"') == 2  # both runs
    assert charts["compare-reward_T_mean"].count('class="series"') == 1  # only `run` logged it
    assert charts["compare-approx_kl"].count('class="series"') == 1  # only `other`
    assert 'stroke="#c0392b"' in charts["compare-approx_kl"] and "#2c5aa0" not in charts["compare-approx_kl"]  # its colour
    assert charts["held-out-compare"].count('class="series"') == 2
    assert "iter_000002 (0.7000)" in html and "2 of ?" in html  # best held-out; `other` has no config.yaml
    assert "agent (preset full) · model vlm-7b" in html  # which model gave `run`'s rewards
    assert main(["--run", str(run), "--run", str(other)]) == 2 and "needs --out" in capsys.readouterr().err
    assert main(["--run", str(run), "--run", str(other), "--out", str(tmp_path / "c.html")]) == 0
    assert (tmp_path / "c.html").read_text().count('class="series"') >= 6
    assert main(["--run", str(run), "--run", str(tmp_path / "nope"), "--out", str(tmp_path / "d.html")]) == 2


def test_reward_label_names_a_served_rewards_preset_and_model(tmp_path):
    from training.report import RunFiles, reward_label

    served = {"service": "http://h:8766/v1/score", "preset": "no_audit", "model": "vlm-a", "temperature": 0.0}
    files = RunFiles(tmp_path, config={"reward": "http", "reward_options": {"url": served["service"]}},
                     reward_backbone=served)
    assert reward_label(files) == "http (preset no_audit) · model vlm-a"
    files.reward_backbone = {"service": served["service"], "scoring": "unreported: its /v1/info has no 'scoring'"}
    assert reward_label(files) == "http · model unreported"
    files.reward_backbone = None
    assert reward_label(files) == "http"  # a run from before the record: nothing claimed
    files.config = {"reward": "agent", "reward_options": {"preset": "full"}}
    files.reward_backbone = {**served, "preset": "direct"}
    assert reward_label(files) == "agent (preset full) · model vlm-a"  # the config's own preset wins


def test_the_report_shows_and_compares_only_the_latest_measurement(run):
    """A resume changed the held-out set (eval_key): its header's best and the held-out section follow the
    rule of training/best.py (--tag best, pruning), not the old measurement's higher means."""
    rows = [{"iteration": 0, "eval_reward_mean": 0.2, "eval_key": "aaaa"},
            {"iteration": 2, "eval_reward_mean": 0.7, "eval_key": "aaaa"},
            {"iteration": 2, "eval_reward_mean": 0.1, "eval_key": "bbbb"},
            {"iteration": 3, "eval_reward_mean": 0.4, "eval_key": "bbbb"}]
    _lines(run / "eval.jsonl", rows)
    files = read_run(run)
    assert [(r["iteration"], r["eval_reward_mean"]) for r in files.evals] == [(2, 0.1), (3, 0.4)]
    assert files.other_evals == 2 and files.items == {}  # the samples carry no key: an earlier measurement's
    html = render_training_report(run)
    assert "iter_000002 (eval_reward_mean 0.1000)" in html and "earlier held-out measurements" in html


def test_a_resumed_iteration_counts_its_last_attempt_in_untrimmed_logs(tmp_path):
    """Logs of a run resumed before logs were trimmed: iteration 3 written twice. Its ineligible lines and
    rollouts were counted twice (4 ineligible instead of 3, a rollout table of 4 clips for 2)."""
    run = tmp_path / "run"
    run.mkdir()
    metrics = [{"iteration": it, "reward_mean": 0.5, "ineligible_count": 1} for it in (1, 2, 3)]
    metrics.append({"iteration": 3, "reward_mean": 0.7, "ineligible_count": 1})  # the resumed attempt
    _lines(run / "metrics.jsonl", metrics)
    first = [{"iteration": it, "prompt": "p", "reason": f"fault {it}"} for it in (1, 2, 3)]
    _lines(run / "ineligible.jsonl", [*first, {"iteration": 3, "prompt": "p", "reason": "fault 3 again"}])
    rollouts = [{"iteration": it, "rank": 0, "group": 0, "sample": s, "prompt": "p", "reward": r, "advantage": 0.0,
                 "video": f"rollout_videos/it{it}_s{s}.mp4"} for it, r in ((1, 0.5), (2, 0.5), (3, 0.5), (3, 0.7))
                for s in range(2)]
    _lines(run / "rewards.jsonl", rollouts)
    files = read_run(run)
    assert [r["reason"] for r in files.ineligible] == ["fault 1", "fault 2", "fault 3 again"]
    assert [(r["sample"], r["reward"]) for r in files.rollouts] == [(0, 0.7), (1, 0.7)]
    assert "Ineligible rewards (3;" in render_training_report(run)


def test_rollouts_without_a_video_show_as_rows_with_the_reason(run):
    """A diverged rollout (``video: null``, ``video_skipped``, training/rollout_log.py) or one whose mp4 could not
    be written (``video: null``) vanished from the rollouts table; an iteration whose videos were all skipped
    was not shown at all (the table fell back to an older iteration)."""
    from training.rollout_log import video_skipped

    _clip(run / "rollout_videos" / "iter_000004" / "r0_g0_s00.mp4")
    rows = [{"iteration": 4, "rank": 0, "group": 0, "sample": 0, "prompt": "lift", "reward": 0.8, "run_id": None,
             "advantage": 0.7, "video": "rollout_videos/iter_000004/r0_g0_s00.mp4"},
            {"iteration": 4, "rank": 0, "group": 0, "sample": 1, "prompt": "lift", "reward": None, "run_id": None,
             "advantage": None, "video": None, "video_skipped": video_skipped("nan")},
            {"iteration": 4, "rank": 0, "group": 1, "sample": 0, "prompt": "wipe", "reward": 0.4, "run_id": None,
             "advantage": 0.0, "video": None}]  # its mp4 could not be written
    with (run / "rewards.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    assert [(r["group"], r["sample"]) for r in read_run(run).rollouts] == [(0, 0), (0, 1), (1, 0)]
    rollouts = render_training_report(run).split('id="rollouts-table"')[1].split("</table>")[0]
    assert rollouts.count("<tr>") == 3 and "rank 0 group 1" in rollouts  # header and both groups
    assert rollouts.count('class="strip"') == 1 and rollouts.count("no video:") == 2
    assert "rollout diverged: its latents hold NaN" in rollouts and "not written" in rollouts
    everything_skipped = [{**r, "iteration": 5, "video": None, "video_skipped": video_skipped("inf")} for r in rows]
    with (run / "rewards.jsonl").open("a") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in everything_skipped)
    html = render_training_report(run)
    assert "Training rollouts of iteration 5" in html and html.count("latents hold inf") == 3


def test_eval_rewards_rows_without_a_place_are_counted_apart_from_torn_lines(run):
    """An eval_rewards.jsonl row whose prompt or sample is no integer was counted among the lines "not JSON:
    being written, or torn", which it is not."""
    with (run / "eval_rewards.jsonl").open("a") as fh:
        fh.write(json.dumps({"iteration": 3, "prompt": None, "sample": 0, "reward": 0.5}) + "\n")
        fh.write(json.dumps({"iteration": 3, "prompt": 0, "reward": 0.5}) + "\n")
    files = read_run(run)
    assert files.skipped_lines == 1  # the torn metrics.jsonl line only
    html = render_training_report(run)
    assert "1 (not JSON" in html
    assert "eval_rewards.jsonl rows left out" in html and "2 whose prompt, sample or iteration" in html


def test_header_names_the_model_revision_and_the_curves_chart_empty_steps(run):
    """The header showed model_path but not model_revision (the pinned hub branch, tag or commit), and the
    curves left out empty_steps (optimizer steps skipped for want of a valid sample)."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert "wan · /models/wan · lora" in render_training_report(run)  # no revision: nothing added
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "model_path": "Org/wan", "model_revision": "v1.2"}))
    rows = [{"iteration": i, "reward_mean": 0.1, "empty_steps": e} for i, e in ((1, 0), (2, 2))]
    _lines(run / "metrics.jsonl", rows)
    html = render_training_report(run)
    assert "wan · Org/wan (revision v1.2) · lora" in html
    assert 'id="curve-empty_steps"' in html and "x=2 y=2" in html


@pytest.mark.parametrize("out", ["folder", "under_a_file"])
def test_cli_names_an_out_it_cannot_write_instead_of_a_traceback(run, tmp_path, capsys, out):
    """--out naming a folder (IsADirectoryError on the rename) or a path under a file (FileExistsError from
    mkdir) ended in an OSError traceback; like a wrong --run it is one error line and exit 2."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "a_file").write_text("x")
    target = tmp_path / "folder" if out == "folder" else tmp_path / "a_file" / "page.html"
    assert main(["--run", str(run), "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(target.parent if out == "under_a_file" else target) in err
    assert (tmp_path / "a_file").read_text() == "x" and not list((tmp_path / "folder").iterdir())


@pytest.mark.parametrize("means, drop, starred", [
    ({0: 0.2, 2: 0.7, 3: 0.9}, (), 2),  # the higher 3 has no checkpoint (or it was pruned)
    ({0: 0.2, 2: 0.7, 3: 0.7}, (), 2),  # a tie goes to the later iteration only among checkpoints
    ({0: 0.9, 2: 0.7, 3: 0.4}, (0,), 2),  # the baseline at iteration 0 has no checkpoint
    ({0: 0.9, 2: 0.7, 3: 0.4}, (0, 2), None),  # no checkpoint evaluated: nothing starred, header "none"
])
def test_the_starred_evaluation_is_the_headers_best_checkpoint(run, means, drop, starred):
    _lines(run / "eval.jsonl", [{"iteration": it, "eval_reward_mean": m} for it, m in means.items()])
    for it in drop:
        shutil.rmtree(run / "checkpoints" / f"iter_{it:06d}")
    html = render_training_report(run)
    held_out = html.split('id="held-out-table"')[1].split("</table>")[0]
    assert re.findall(r"iteration (\d+) \*", held_out) == ([str(starred)] if starred is not None else [])
    header = html.split('id="run-header"')[1].split("</section>")[0]
    assert (f"iter_{starred:06d} (eval_reward_mean {means[starred]:.4f})" if starred is not None else
            "none") in header
