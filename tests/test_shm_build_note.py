"""DeepSpeed's CPU backend builds its shared-memory op at process-group start, silently for minutes, and again
whenever the launch's DeepSpeed is at another path than the kept build's (torch's build file holds absolute
source paths): the launch now says so beforehand where the extensions folder proves it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from training.build_locks import SHM_OP, shm_build_note

LINUX = pytest.mark.skipif(sys.platform != "linux", reason="DeepSpeed builds its shm op on Linux only")
SMOKE = str(Path(__file__).resolve().parents[1] / "training" / "configs" / "smoke.yaml")


def _built(root: Path, deepspeed_dir: Path) -> Path:
    """A finished build in ``root`` as torch writes it (build.ninja, the library) from ``deepspeed_dir``."""
    folder = root / SHM_OP
    folder.mkdir(parents=True)
    comm = str(deepspeed_dir / "ops" / "csrc" / "cpu" / "comm").replace(" ", "$ ")
    (folder / "build.ninja").write_text(f"rule compile\n  command = c++ $in -o $out\n\n"
                                        f"build shm_interface.o: compile {comm}/shm_interface.cpp\n"
                                        f"build shm.o: compile {comm}/shm.cpp\n\ndefault {SHM_OP}.so\n")
    (folder / f"{SHM_OP}.so").write_bytes(b"\x7fELF")
    return folder


def test_no_note_for_a_build_from_this_deepspeed(tmp_path):
    here = tmp_path / "a venv" / "site-packages" / "deepspeed"  # a space: ninja writes it "$ "
    _built(tmp_path / "ext", here)
    assert shm_build_note(tmp_path / "ext", here) is None


def test_a_missing_or_unfinished_build_is_announced(tmp_path):
    here = tmp_path / "venv" / "deepspeed"
    note = shm_build_note(tmp_path / "ext", here)
    assert note is not None and f"build its shared-memory op ({SHM_OP}) in {tmp_path / 'ext' / SHM_OP}" in note
    assert "no finished build is there" in note and "nothing printed meanwhile" in note
    (_built(tmp_path / "ext", here) / f"{SHM_OP}.so").unlink()  # a build killed before it linked
    assert "no finished build is there" in (shm_build_note(tmp_path / "ext", here) or "")


def test_a_build_from_another_environment_is_announced_even_where_its_path_contains_this_one(tmp_path):
    """The case found on this machine: the kept build was made from /check/work/main/.venv's DeepSpeed, whose
    path contains /work/main/.venv's; a launch from the latter rebuilt it without a word."""
    here = Path("/work/main/.venv/lib/python3.11/site-packages/deepspeed")
    other = Path("/check") / here.relative_to("/")
    _built(tmp_path / "ext", other)
    note = shm_build_note(tmp_path / "ext", here)
    assert note is not None and f"made from the DeepSpeed at {other}, and this launch's is at {here}" in note, note
    assert "TORCH_EXTENSIONS_DIR" in note


def test_no_note_where_deepspeed_was_installed_with_the_op(tmp_path):
    here = tmp_path / "deepspeed"
    (here / "ops" / "comm").mkdir(parents=True)
    (here / "ops" / "comm" / f"{SHM_OP}_op.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert shm_build_note(tmp_path / "ext", here) is None


@LINUX
def test_the_launch_announces_the_build(tmp_path, capsys, monkeypatch, followed_launchers):
    """On rank 0's stderr before the process group starts (not in --check's report: a build the launch itself does
    not start is no finding about the config)."""
    import training.trainer
    from training.train import main

    for var in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RANK", "0")  # as a launcher sets them (undone after the test)
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))  # empty: the op is built at the start
    monkeypatch.setenv("CXX", sys.executable)  # a compiler on any machine (none on a slim CI image)
    monkeypatch.setenv("PATH", f"{_tool_dir(tmp_path / 'bin', 'ninja')}{os.pathsep}{os.environ['PATH']}")  # ninja too
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")  # DeepSpeed's CPU backend on a CUDA machine too
    monkeypatch.setattr(training.trainer, "train", lambda *_a, **_k: tmp_path / "run")
    args = ["--config", SMOKE, "--output_dir", str(tmp_path / "run")]
    assert main(args) == 0
    said = capsys.readouterr().err
    assert f"note: DeepSpeed will build its shared-memory op ({SHM_OP}) in {tmp_path / 'ext' / SHM_OP}" in said, said
    import deepspeed  # its path, as the launch found it

    _built(tmp_path / "ext", Path(os.path.dirname(deepspeed.__file__)))
    assert main(args) == 0
    again = capsys.readouterr()
    assert "will build its shared-memory op" not in again.out + again.err


@LINUX
def test_no_note_where_deepspeed_builds_no_cpu_op(tmp_path):
    """A CUDA launch uses DeepSpeed's CUDA accelerator (no shm op); without a compiler the op builder says the op is
    incompatible and nothing is built."""
    from training.build_locks import launch_build_note

    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "CXX": sys.executable}  # a compiler on any machine
    assert launch_build_note(env, cuda=False) is not None  # the folder is empty: a build comes
    assert launch_build_note(env, cuda=True) is None
    assert launch_build_note({**env, "DS_ACCELERATOR": "cpu"}, cuda=True) is not None
    assert launch_build_note({**env, "DS_ACCELERATOR": "xpu"}, cuda=False) is None
    assert launch_build_note({**env, "CXX": str(tmp_path / "no-such-compiler")}, cuda=False) is None


@LINUX
def test_a_deepspeed_reached_through_dot_dot_is_the_one_its_build_names(tmp_path, monkeypatch):
    """DeepSpeed's op builder passes its sources through os.path.abspath (``..`` gone, links kept), while the
    package's path keeps a sys.path entry's ``..`` (PYTHONPATH=/x/venv/bin/../lib/...): the kept build was then
    named 'another DeepSpeed' at every launch."""
    from training.build_locks import launch_build_note

    site = tmp_path / "site"
    (site / "deepspeed").mkdir(parents=True)
    (site / "deepspeed" / "__init__.py").write_text("")
    (tmp_path / "bin").mkdir()
    _built(tmp_path / "ext", site / "deepspeed")
    monkeypatch.delitem(sys.modules, "deepspeed", raising=False)  # find_spec answers an imported module's spec
    monkeypatch.syspath_prepend(str(tmp_path / "bin" / ".." / "site"))
    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "CXX": sys.executable}
    assert launch_build_note(env, cuda=False) is None


@LINUX
def test_a_harness_launch_announces_no_build(tmp_path):
    """Every process a test starts builds no shm op (tests/harness_site's sitecustomize), yet its launches printed
    the note: a hung test launch's output then ended on 'will build ... nothing printed meanwhile', blaming a build
    that never ran. The harness that turns the build off turns its announcement off too."""
    import subprocess

    from tests.launches import ROOT, harness_env

    env = harness_env(extra={"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "CXX": sys.executable})  # a compiler
    probe = "import os; from training.build_locks import launch_build_note; print(launch_build_note(os.environ, False))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "None\n", done.stdout + done.stderr


def _tool_dir(folder: Path, *names: str) -> str:
    """A PATH folder holding executables ``names`` (stand-ins: nothing runs them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
        (folder / name).chmod(0o755)
    return str(folder)


@LINUX
def test_a_compiler_command_with_arguments_is_a_compiler(tmp_path):
    """``CXX="ccache g++"`` (torch writes it into the build file as it is, and the shell runs it) was looked up as one
    program named "ccache g++": not found, so the launch said nothing while the op was built."""
    import shlex

    from training.build_locks import launch_build_note

    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "PATH": _tool_dir(tmp_path / "bin", "ninja", "ccache")}
    for cxx in (f"ccache {shlex.quote(sys.executable)}", f"{shlex.quote(sys.executable)} -O2"):
        note = launch_build_note({**env, "CXX": cxx}, cuda=False)
        assert note is not None and "will build its shared-memory op" in note, (cxx, note)
    assert launch_build_note({**env, "CXX": "no-such-compiler -O2"}, cuda=False) is None
    assert launch_build_note({**env, "CXX": '"unbalanced'}, cuda=False) is None  # not a command: as no compiler


@LINUX
def test_without_ninja_the_note_says_the_build_will_fail(tmp_path, monkeypatch):
    """torch's extension builds need ninja: without it on the PATH the note said "will build" and DeepSpeed then
    failed at process-group start ("due to ninja not being installed"). It says ninja is missing instead."""
    from training.build_locks import launch_build_note

    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "CXX": sys.executable, "PATH": _tool_dir(tmp_path / "bin")}
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))  # no ninja beside it either
    note = launch_build_note(env, cuda=False)
    assert note is not None and "will build" not in note, note
    assert "ninja" in note and "not on the PATH" in note and "pip install ninja" in note and SHM_OP in note, note
    with_ninja = {**env, "PATH": _tool_dir(tmp_path / "bin", "ninja")}
    assert "will build its shared-memory op" in (launch_build_note(with_ninja, cuda=False) or "")
    import deepspeed  # a kept build from this DeepSpeed: nothing is built, ninja or not

    _built(tmp_path / "ext", Path(os.path.dirname(deepspeed.__file__)))
    assert launch_build_note(env, cuda=False) is None


@LINUX
def test_ninja_beside_python_but_not_on_the_path_is_named(tmp_path, monkeypatch):
    """DeepSpeed installs the ``ninja`` package, so a venv has ``.venv/bin/ninja``; a launch as the README writes it
    (``.venv/bin/torchrun ...``, the venv not activated) has no ninja on the PATH, and torch runs ``ninja`` from the
    PATH only. The note said "pip install ninja", which answers "already satisfied": it names the folder to put on
    the PATH instead."""
    from training.build_locks import launch_build_note

    venv_bin = Path(_tool_dir(tmp_path / "venv" / "bin", "ninja"))
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "CXX": "sh", "PATH": _tool_dir(tmp_path / "bin", "sh")}
    note = launch_build_note(env, cuda=False)
    assert note is not None and "will build" not in note and "pip install ninja" not in note, note
    assert f"{venv_bin / 'ninja'}" in note and f"PATH={venv_bin}:" in note, note


@LINUX
def test_a_compiler_path_from_the_home_folder_is_found_as_the_shell_finds_it(tmp_path):
    """``CXX="~/bin/g++"``: a torch that writes CXX into the build file as it is has the shell expand the leading
    ``~`` (the HOME of the launch's environment), so the op is built; the check looked for a file named ``~/bin/g++``
    in the current folder, found none, and the launch said nothing while the op was built. A quoted ``~`` is not
    expanded by the shell, nor is it found here."""
    from training.build_locks import launch_build_note

    home = tmp_path / "home"
    _tool_dir(home / "bin", "g++")
    env = {"TORCH_EXTENSIONS_DIR": str(tmp_path / "ext"), "PATH": _tool_dir(tmp_path / "bin", "ninja"),
           "HOME": str(home)}
    for cxx in ("~/bin/g++", "~/bin/g++ -O2", "  ~/bin/g++"):
        note = launch_build_note({**env, "CXX": cxx}, cuda=False)
        assert note is not None and "will build its shared-memory op" in note, (cxx, note)
    for cxx in ("'~/bin/g++'", "~/bin/no-such-g++", "~no-such-user-x/bin/g++"):
        assert launch_build_note({**env, "CXX": cxx}, cuda=False) is None, cxx
