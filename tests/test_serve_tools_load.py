"""`raa serve-tools` refusing to start when a tool's weights are missing: one error line naming what to set, exit 2,
no server started (moved out of tests/test_service.py, its size)."""

from __future__ import annotations


def test_serve_tools_without_the_surprise_weights_is_one_error_line(tmp_path, monkeypatch):
    """Missing V-JEPA 2 weights failed inside uvicorn's lifespan: a long traceback and exit 3."""
    from typer.testing import CliRunner

    from graph.cli import app

    monkeypatch.delenv("RAA_TOOLS_TOKEN", raising=False)
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: started.append(a))
    res = CliRunner().invoke(app, ["serve-tools", "--motion", "lk", "--allowed-root", str(tmp_path),
                                   "--vjepa-model", str(tmp_path / "no-such-vjepa")])
    assert res.exit_code == 2 and not started, res.output
    assert "error: surprise tool load failure" in res.output and "--no-surprise" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(app, ["serve-tools", "--motion", "lk", "--allowed-root", str(tmp_path), "--no-surprise"])
    assert res.exit_code == 0 and len(started) == 1, res.output


def test_serve_tools_cotracker3_without_weights_names_the_flags_too(tmp_path, monkeypatch):
    """It named only RAA_COTRACKER_CHECKPOINT / RAA_COTRACKER_HUB_DIR, not the flags of the command the user typed."""
    from typer.testing import CliRunner

    from graph.cli import app

    for var in ("RAA_TOOLS_TOKEN", "RAA_COTRACKER_CHECKPOINT", "RAA_COTRACKER_HUB_DIR"):
        monkeypatch.delenv(var, raising=False)
    started = []
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: started.append(a))
    res = CliRunner().invoke(app, ["serve-tools", "--motion", "cotracker3", "--allowed-root", str(tmp_path),
                                   "--no-surprise"])
    assert res.exit_code == 2 and not started, res.output
    text = " ".join(res.output.split())
    assert "error: motion tool load failure" in text and "RAA_COTRACKER_CHECKPOINT" in text
    assert "--cotracker-checkpoint" in text and "--cotracker-hub-dir" in text
    missing = tmp_path / "none.pth"  # a path given: its own message, no hint about flags it already used
    res = CliRunner().invoke(app, ["serve-tools", "--motion", "cotracker3", "--allowed-root", str(tmp_path),
                                   "--no-surprise", "--cotracker-checkpoint", str(missing)])
    assert res.exit_code == 2 and f"checkpoint not found: {missing}" in res.output
    assert "--cotracker-hub-dir" not in res.output
