"""Stale build locks of torch's JIT C++ extensions (DeepSpeed's ops on CPU).

On CPU, DeepSpeed builds its shared-memory communication op (``deepspeed_shm_comm``) with torch's JIT extension
loader the first time a run starts its process group. torch guards each build with a ``lock`` file in the
extension's build folder and, while that file exists, waits for it without limit and without a word. A build
that was interrupted (Ctrl-C during a first launch, a killed test run) leaves the file behind, and every later
launch on the machine hangs at process-group start with no message.

Decisions where the issue was silent: a lock file older than ``STALE_AFTER_S`` (30 minutes; the op builds in
a minute or two of CPU time, several minutes of wall time on a busy machine) is reported as stale, with the
command that removes it: by ``--check`` as a note, and at launch by rank 0 on stderr before the process group
starts, so the last line of a hung launch says why. The launch still goes on: a lock that old is almost surely stale, but removing a file another user's build may hold is the
user's call. The extensions folder is torch's own (`extensions_root`): ``TORCH_EXTENSIONS_DIR`` when set,
otherwise ``<user cache>/torch_extensions/py<version>_<cpu|cuXY|rocmXY>``; the environment is read at the CLI
edge (training/train.py).

The build itself is silent too (minutes, nothing printed after DeepSpeed's accelerator warnings), and it comes
again whenever the launch's DeepSpeed is at another path than the one the kept build was made from (another
checkout's ``.venv``, or the same one reached through a link): torch writes the build file with the absolute
source paths, so its compile commands change and ninja rebuilds. `shm_build_note` says so beforehand where the
files prove it: no built op in the folder, or a build file naming another DeepSpeed's sources. A build it cannot
foresee (a kept build whose sources or compiler changed since) goes unannounced. ``CXX`` may be a command with
arguments (``ccache g++``): its first word is the compiler looked for, a leading ``~`` expanded as the shell expands it
(``~/bin/g++``: the HOME of the launch's environment). That is how a torch that writes ``CXX`` into the build file as
it is runs it; the torch 2.13 this repo was last checked with quotes the whole value as one word there
(``cxx = 'ccache g++'``), so with it such a ``CXX`` (arguments, or a ``~``) is no program and the build fails in
DeepSpeed's own error, after the note. Where a build comes and ninja is not on the PATH, the note says that instead:
torch builds through ninja, so DeepSpeed fails there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

STALE_AFTER_S = 30 * 60.0
"""Age after which an extension build lock counts as left behind by an interrupted build."""

SHM_OP = "deepspeed_shm_comm"
"""DeepSpeed's shared-memory communication op, which its CPU backend builds at process-group start."""


def extensions_root(environ: Mapping[str, str]) -> Path:
    """The folder holding torch's JIT extension builds (one subfolder per extension), as
    ``torch.utils.cpp_extension`` chooses it."""
    if environ.get("TORCH_EXTENSIONS_DIR") is not None:
        return Path(environ["TORCH_EXTENSIONS_DIR"])
    import torch
    from torch.utils.cpp_extension import get_default_build_root

    if torch.version.hip is not None:
        accelerator = f"rocm{torch.version.hip.replace('.', '')}"
    elif torch.version.cuda is not None:
        accelerator = f"cu{torch.version.cuda.replace('.', '')}"
    else:
        accelerator = "cpu"
    version = f"py{sys.version_info.major}{sys.version_info.minor}{sys.abiflags}"
    return Path(get_default_build_root()) / f"{version}_{accelerator}"


def stale_locks(root: Path, now: float, stale_after_s: float = STALE_AFTER_S) -> list[tuple[Path, float]]:
    """(path, age in seconds) of the build locks (``root/<extension>/lock``) last modified more than
    ``stale_after_s`` before ``now`` (Unix seconds), by path; none when ``root`` does not exist or cannot be
    read."""
    try:
        candidates = sorted(root.glob("*/lock"))
    except OSError:
        return []
    found = []
    for lock in candidates:
        try:
            age = now - lock.stat().st_mtime
        except OSError:  # removed meanwhile: the build finished
            continue
        if age > stale_after_s:
            found.append((lock, age))
    return found


def stale_lock_note(locks: Sequence[tuple[Path, float]]) -> str | None:
    """What to tell the user about ``locks`` (`stale_locks`), None when there are none."""
    if not locks:
        return None
    ages = ", ".join(f"{lock} ({_age(age)} old)" for lock, age in locks)
    return (f"warning: torch extension build lock(s) left by an interrupted build: {ages}. While such a file "
            "exists, the DeepSpeed op build at process-group start waits forever without a message. If no "
            f"build is running, remove it: rm {' '.join(shlex.quote(str(lock)) for lock, _ in locks)}")


def shm_build_note(root: Path, deepspeed_dir: Path) -> str | None:
    """A note that DeepSpeed's CPU backend will build `SHM_OP` into ``root/deepspeed_shm_comm`` at process-group
    start (module docstring), for a launch that uses DeepSpeed's CPU accelerator with a C++ compiler (the
    caller's call: the op builder's own probe runs compiler subprocesses); None when a build there was made
    from this ``deepspeed_dir``'s sources, or DeepSpeed was installed with the op prebuilt."""
    if any((deepspeed_dir / "ops" / "comm").glob(f"{SHM_OP}_op*.so")):  # DS_BUILD_SHM_COMM=1 at install: loaded
        return None
    folder = root / SHM_OP
    try:
        built = (folder / f"{SHM_OP}.so").is_file()
        ninja = (folder / "build.ninja").read_text(errors="replace") if built else ""
    except OSError:
        built, ninja = False, ""
    source = deepspeed_dir / "ops" / "csrc" / "cpu" / "comm" / "shm.cpp"
    lines = re.findall(r"^build shm\.o: compile (.+)$", ninja, flags=re.MULTILINE)  # ninja escapes a space "$ "
    if built and str(source).replace(" ", "$ ") in lines:
        return None
    if built and lines:
        other = lines[0].replace("$ ", " ").removesuffix("/ops/csrc/cpu/comm/shm.cpp")
        why = f"the build there was made from the DeepSpeed at {other}, and this launch's is at {deepspeed_dir}"
    else:
        why = "no finished build is there"
    return (f"note: DeepSpeed will build its shared-memory op ({SHM_OP}) in {folder} when the process group "
            f"starts, since {why}: a minute or two of CPU time, several minutes of wall time on a busy machine, "
            "with nothing printed meanwhile. Environments that take turns rebuild it each time unless each sets "
            "its own TORCH_EXTENSIONS_DIR")


def launch_build_note(environ: Mapping[str, str], cuda: bool) -> str | None:
    """`shm_build_note` for a launch with ``environ`` (read at the CLI edge) and CUDA available or not: only where
    DeepSpeed's CPU backend builds the op: its CPU accelerator (no CUDA, or ``DS_ACCELERATOR=cpu``), Linux (the
    op's only platform), a C++ compiler on the PATH (``CXX``, else ``c++``, as torch builds; a command with
    arguments, ``ccache g++``, by its first word: the shell runs it from torch's build file), DeepSpeed found.
    Where a build comes and ninja is not on the PATH (torch builds through it), `ninja_missing_note` instead."""
    accelerator = environ.get("DS_ACCELERATOR")
    if accelerator not in (None, "cpu") or (cuda and accelerator is None) or sys.platform != "linux":
        return None
    if not _program_found(environ.get("CXX", "c++"), environ.get("PATH"), environ.get("HOME")):
        return None
    spec = importlib.util.find_spec("deepspeed")  # its path, without importing it
    if spec is None or spec.origin is None:
        return None
    # as DeepSpeed's op builder names its sources: os.path.abspath drops a sys.path entry's "..", keeps links
    root = extensions_root(environ)
    note = shm_build_note(root, Path(os.path.abspath(spec.origin)).parent)
    if note is not None and shutil.which("ninja", path=environ.get("PATH")) is None:
        return ninja_missing_note(root, shutil.which("ninja", path=os.path.dirname(sys.executable)))
    return note


def ninja_missing_note(root: Path, beside_python: str | None = None) -> str:
    """What to tell a launch whose DeepSpeed must build `SHM_OP` in ``root`` without ninja on the PATH: the build
    fails at process-group start (the note said it "will build", and DeepSpeed's RuntimeError followed).
    ``beside_python``: the ninja in the Python's own folder (DeepSpeed installs the ``ninja`` package, so a venv has
    one), unused by torch, which runs ``ninja`` from the PATH: a venv not activated (``.venv/bin/torchrun ...``)."""
    if beside_python is None:
        fix = "Install it in this environment (pip install ninja) or put it on the PATH"
    else:
        folder = os.path.dirname(beside_python)
        fix = (f"This environment's ninja, {beside_python}, is not on the PATH: activate the environment, or launch "
               f"with PATH={folder}:$PATH")
    return (f"warning: DeepSpeed has to build its shared-memory op ({SHM_OP}) in {root / SHM_OP} when the process "
            "group starts, and ninja, which torch builds extensions with, is not on the PATH: DeepSpeed will fail "
            f"there (\"Unable to JIT load the {SHM_OP} op due to ninja not being installed\"). {fix}")


def _program_found(command: str, path: str | None, home: str | None = None) -> bool:
    """Whether the program of shell command ``command`` (its first word, a leading ``~`` expanded as the shell does:
    `_tilde_expanded`, with ``home`` the environment's HOME) is on ``path`` (None: the process's PATH); False for no
    command, or text the shell would not split (an unbalanced quote)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and shutil.which(_tilde_expanded(command, words[0], home), path=path) is not None


def _tilde_expanded(command: str, word: str, home: str | None) -> str:
    """``word``, the first word of ``command`` as `shlex.split` gives it, with the shell's tilde expansion: an unquoted
    ``~`` or ``~USER`` before its first ``/`` is ``home`` (else the process's home) or USER's home folder; a prefix with
    a quote, a backslash or a ``$`` in it, and an unknown USER, stay as written (`shlex.split` drops the quotes that
    tell, hence ``command``). ``CXX="~/bin/g++"`` was looked for as a folder named ``~`` in the current one: not found,
    so the launch said nothing while the op was built."""
    prefix = re.match(r"~[^/\s]*", command.lstrip())
    if prefix is None or any(c in prefix[0] for c in "'\"\\$`"):
        return word
    user = prefix[0][1:]
    folder = home if not user and home else os.path.expanduser(prefix[0])  # ~USER: the password database's
    return word if folder == prefix[0] else folder + word[len(prefix[0]):]


def _age(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
