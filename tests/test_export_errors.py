"""training.export's refusals for a checkpoint that cannot be read: one error line (exit 2), not a traceback."""

from __future__ import annotations

import pytest
from checkpoint_runs import saved_run

from training.export import ExportError, export_policy, main


@pytest.mark.parametrize("shards", [0, 1])
def test_a_corrupt_checkpoint_file_is_an_export_error(tmp_path, capsys, shards):
    """A truncated .pt (a save killed part-way, a disk error) was torch's RuntimeError traceback ("PytorchStreamReader
    failed reading zip archive"), from `python -m training.export` and from the trainer's final export."""
    cfg, ckpt = saved_run(tmp_path)
    folder = ckpt / "iter_000003"
    (folder / "mp_rank_00_model_states.pt").write_bytes(b"PK\x03\x04 cut short")
    for r in range(shards):
        (folder / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(ExportError, match=r"cannot read checkpoint .*iter_000003: RuntimeError: .*zip archive"):
        export_policy(cfg, tmp_path / "final")
    assert main(["--run", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read checkpoint") and "Traceback" not in err
    assert not (tmp_path / "run" / "final").exists()


@pytest.mark.parametrize("latest", ["", "  \n", "../elsewhere", "."])
def test_an_empty_or_unsafe_latest_is_named(tmp_path, latest):
    """An empty 'latest' (a write killed part-way) made the exporter read the checkpoints folder itself as the
    checkpoint ("cannot read checkpoint .../checkpoints: ... mp_rank_00_model_states.pt is missing")."""
    cfg, ckpt = saved_run(tmp_path)
    (ckpt / "latest").write_text(latest)
    with pytest.raises(ExportError, match=r"'latest' is empty or does not name a checkpoint folder .*pass a tag"):
        export_policy(cfg, tmp_path / "final")


def test_a_tag_outside_the_checkpoint_folder_is_refused(tmp_path):
    cfg, ckpt = saved_run(tmp_path)
    (tmp_path / "run" / "elsewhere").mkdir()
    for tag in ("../elsewhere", "", "."):
        with pytest.raises(ExportError, match="is not a checkpoint tag"):
            export_policy(cfg, tmp_path / "final", tag=tag)
