"""A clip over the decode limit is a final video fault (`tools.video_limits`): `--retry-ineligible` leaves its row
while the clip is unchanged, so after raising the limit its row must be deleted for the clip to be scored again. The
batch said only the size that would admit it, not that step: it now names the rows and what to do."""

from __future__ import annotations

import json

from graph.cli import app
from tests.cli_agent_helpers import _scripted, runner
from tests.graph_scripts import square_clips


def test_a_batch_says_how_a_clip_over_the_decode_limit_gets_scored_again(monkeypatch, tmp_path):
    import tools.video_limits

    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 2)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    manifest.write_text("".join(json.dumps({"path": f"c{i}.mp4", "instruction": "push"}) + "\n" for i in range(2)))
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 100)
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert all("VideoTooLargeError" in json.loads(line)["result"]["reasons"][0] for line in out.read_text().splitlines())
    hint = (f"2 row(s) already in {out} ineligible for a clip over the decode limit its reason names: final while the "
            "clip is unchanged (--retry-ineligible leaves them); after raising the limit, delete them")
    assert hint in " ".join(res.output.split()), res.output
    res = runner.invoke(app, args)  # a plain resume says it too
    assert res.exit_code == 0 and hint in " ".join(res.output.split()), res.output
    res = runner.invoke(app, [*args, "--retry-ineligible"])  # the flag leaves them: it said nothing of them
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and text.count(hint) == 1, res.output
    assert "0 ineligible row(s) removed" in text and "--retry-ineligible scores" not in text, res.output


def test_rows_over_the_decode_limit_are_told_from_other_video_faults():
    from graph.batch_retry import over_decode_limit

    def row(message: str, kind: str = "video") -> dict:
        return {"status": "ineligible", "faults": [{"stage": "quality", "kind": kind, "message": message}]}

    assert over_decode_limit(row("VideoTooLargeError: c.mp4: 33 frame(s) of 128x128 would take 1.55 MiB decoded"))
    assert over_decode_limit(row("VideoError: VideoTooLargeError: c.mp4: ..."))  # the service's, as rows read before
    assert not over_decode_limit(row("VideoDecodeError: c.mp4: invalid data"))
    assert not over_decode_limit(row("surprise config: HTTP 413: VideoTooLargeError", kind="tool"))
    assert not over_decode_limit({"status": "scored", "faults": []})


def test_a_retry_that_writes_an_ineligible_row_names_the_decode_limit_rows_once(monkeypatch, tmp_path):
    """A --retry-ineligible run names the rows over the decode limit before it scores (it leaves them), and a run
    that writes an ineligible row names what is left to fix at its end: a retry whose endpoint was still down
    said the decode-limit line twice, at its start and again at its end, the same count."""
    import httpx
    import openai

    from graph.batch import read_manifest
    from tests.graph_scripts import square_batch

    model = _scripted(monkeypatch, tmp_path)
    manifest = square_batch(tmp_path, 2)
    earlier = [{"status": "ineligible", "reasons": ["quality: video: VideoTooLargeError: c0.mp4: 33 frame(s) of "
                                                    "128x128 would take 1.55 MiB decoded"]},
               {"status": "ineligible", "reasons": ["observe: transport: APIConnectionError after 5 attempts"]}]
    out = tmp_path / "results.jsonl"
    out.write_text("".join(json.dumps({**{k: it[k] for k in ("key", "line", "path", "instruction", "preset",
                                                              "manifest")}, "result": r}) + "\n"
                           for it, r in zip(read_manifest(manifest, "visual_verify"), earlier, strict=True)))
    model.script["observe"] = [openai.APIConnectionError(request=httpx.Request("POST", "http://127.0.0.1:9/v1"))]
    res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", "visual_verify",
                              "--retry-ineligible"])
    text = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 to score" in text and "ineligible=1" in text, res.output
    assert text.count(f"1 row(s) already in {out} ineligible for a clip over the decode limit") == 1, res.output
    assert f"1 of the rows already in {out} ineligible for a reason a rerun can fix" in text, res.output


def test_the_decode_limit_hint_agrees_with_its_count(tmp_path):
    """One row over the decode limit was "(--retry-ineligible leaves them) ... delete it (the rows whose reason
    reads ...)": the pronouns and nouns now follow the count."""
    from graph.batch_resume import fixable_lines

    out = tmp_path / "out.jsonl"
    one, = fixable_lines({"too_large": 1}, out, "raa score-batch m.jsonl")
    assert "(--retry-ineligible leaves it); after raising the limit, delete it (the row whose reason reads " \
           'VideoTooLargeError and that has no "repeat_of"; the copies that have one follow) and run again to score ' \
           "its clip: raa score-batch m.jsonl" in one, one
    assert "them" not in one and "rows" not in one, one
    two, = fixable_lines({"too_large": 2}, out)
    assert "(--retry-ineligible leaves them); after raising the limit, delete them (the rows whose reason reads " \
           'VideoTooLargeError and that have no "repeat_of"; the copies that have one follow) and run again to ' \
           "score their clips" in two, two


def test_the_decode_limit_hint_names_the_rows_it_counts(monkeypatch, tmp_path):
    """The count leaves out the copy on a line repeating an earlier line's clip and instruction ("repeat_of"), but
    "delete it (the row whose reason reads VideoTooLargeError)" named the copy too: 1 row counted, 2 such rows in the
    file. The hint now names only the rows it counts, and deleting them is enough: the copy follows its first row."""
    import tools.video_limits

    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    manifest.write_text("".join(json.dumps({"path": "c0.mp4", "instruction": "push", "id": i}) + "\n" for i in "ab"))
    args = ["score-batch", str(manifest), "--out", str(out), "--preset", "decomposed"]
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 100)
    res = runner.invoke(app, args)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert res.exit_code == 0 and [r.get("repeat_of") is not None for r in rows] == [False, True], res.output
    assert all("VideoTooLargeError" in r["result"]["reasons"][0] for r in rows), rows
    text = " ".join(res.output.split())
    assert (f"1 row(s) already in {out} ineligible for a clip over the decode limit" in text
            and 'delete it (the row with "preset": "decomposed" and "draw": 0 (or none) of this manifest\'s clips '
                'whose reason reads VideoTooLargeError and that has no "repeat_of"' in text), text
    monkeypatch.undo()  # the limit raised
    _scripted(monkeypatch, tmp_path)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows if "repeat_of" in r))  # the hint's row deleted
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert [r["result"]["status"] for r in map(json.loads, out.read_text().splitlines())] == ["scored"] * 2


def test_the_decode_limit_hint_names_its_batch_and_leaves_other_batches_rows(monkeypatch, tmp_path):
    """The count is of this batch's rows (its manifest, preset and draw), but "delete them (the rows whose reason
    reads VideoTooLargeError and that have no "repeat_of")" named the rows of every batch sharing the output: a
    researcher deleting them as told lost another preset's or draw's rows, which no run of this command writes
    again. The hint now names the preset and draw, and says the rows of other batches stay."""
    import tools.video_limits

    _scripted(monkeypatch, tmp_path)
    square_clips(tmp_path, 1)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out.jsonl"
    manifest.write_text(json.dumps({"path": "c0.mp4", "instruction": "push"}) + "\n")
    monkeypatch.setattr(tools.video_limits, "DECODE_LIMIT_BYTES", 100)
    for preset, draw in (("direct", 0), ("decomposed", 2)):  # two batches into one output, both over the limit
        res = runner.invoke(app, ["score-batch", str(manifest), "--out", str(out), "--preset", preset,
                                  "--draw", str(draw)])
        assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 2
    text = " ".join(res.output.split())
    assert (f'1 row(s) already in {out} ineligible for a clip over the decode limit' in text
            and 'delete it (the row with "preset": "decomposed" and "draw": 2 of this manifest\'s clips whose reason '
                'reads VideoTooLargeError and that has no "repeat_of"' in text
            and f"rows of other presets, draws or manifests in {out} are not counted: leave them" in text), text


def test_the_decode_limit_hint_names_draw_0_as_rows_without_one(tmp_path):
    """Rows of draw 0 written before draws existed have no "draw": the hint names them too."""
    from graph.batch_resume import fixable_lines

    line, = fixable_lines({"too_large": 2}, tmp_path / "out.jsonl", preset="full", draw=0)
    assert 'the rows with "preset": "full" and "draw": 0 (or none) of this manifest\'s clips' in line, line
