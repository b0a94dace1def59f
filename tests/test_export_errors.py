"""training.export's refusals for a checkpoint that cannot be read: one error line (exit 2), not a traceback."""

from __future__ import annotations

from dataclasses import replace

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


@pytest.mark.parametrize("finetune", ["full", "lora"])
@pytest.mark.slow
def test_an_export_missing_trained_weights_is_refused(tmp_path, finetune):
    """load_policy loaded a full export's transformer/ and a LoRA export's adapter with a warning only when a
    weight was missing: the transformer kept random values there, and a missing adapter weight left that
    adapter at its initialisation (B = 0), so "trained" sampled partly the base model without an error."""
    from safetensors.torch import load_file, save_file

    from training.engine import add_lora, set_full_finetune
    from training.export import load_policy
    from training.export_folder import save_policy
    from training.models import build_world_model

    cfg, _ = saved_run(tmp_path)
    if finetune == "lora":
        cfg = replace(cfg, finetune="lora", lora_rank=4)
    model = build_world_model(cfg, "cpu")
    add_lora(model, cfg) if finetune == "lora" else set_full_finetune(model)
    out = save_policy(model, cfg, tmp_path / "final", iteration=1, source="unit")
    weights = next((out / ("transformer_lora" if finetune == "lora" else "transformer")).glob("*.safetensors"))
    state = load_file(weights)
    dropped = sorted(k for k in state if "lora_B" in k or finetune == "full")[0]
    del state[dropped]
    save_file(state, weights, metadata={"format": "pt"})
    with pytest.raises(ExportError, match=rf"{out}/transformer(_lora)? does not match .*1 weights missing"):
        load_policy(out)
    assert load_policy(out, weights="base")[0] is not None  # the base is still there to compare with
