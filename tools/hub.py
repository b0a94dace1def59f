"""Loading Hugging Face hub models on machines that cannot reach the hub (GPU nodes of a cluster).

`transformers.from_pretrained` given a hub id asks the hub for every file it reads and retries a
connection failure with backoff: measured here without network, a V-JEPA 2 id that is in the local
cache loaded after ~20 s of retries (instead of ~0.1 s), and one that is not failed after ~50 s. Every
process that loads the surprise scorer (each `raa score-batch --processes` worker, each training rank
with `reward: agent`, `raa serve-tools`) paid that at start.

Decisions where the issues were silent:
- Before loading a hub id, `hub_load_kwargs` asks the hub endpoint once (one HEAD, answered within
  `timeout_s` = 3 s; any HTTP status counts as an answer; proxies from the environment apply). When
  it does not answer, the load uses only the local cache (``local_files_only=True``): a cached model
  loads at once, a missing one fails at once with a reason that says the hub was not reachable.
- Local folders, strings that are not hub ids, and ``HF_HUB_OFFLINE=1`` (huggingface_hub's own
  setting, read by it) are left to transformers unchanged, with no request.
- The answer is not remembered: a load is rare (once per process), and a node whose network comes
  back should use it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 3.0


def _on_disk(path: Path) -> bool:
    """``path.exists()``, False where the OS refuses to look (a name longer than the filesystem allows raised
    OSError "File name too long" here: such a name is on no disk, nor is it a hub id)."""
    try:
        return path.exists()
    except OSError:
        return False


def is_hub_id(name: str) -> bool:
    """Whether `name` is a valid hub repo id (``org/name``); a local folder of that name is not asked."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if _on_disk(Path(name)):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def local_path_problem(name: str) -> str | None:
    """Why `name` cannot be what ``from_pretrained`` loads when it names a local path: a file (it reads a
    folder saved by ``save_pretrained``), or nothing on disk while it is no hub id either; None for a folder
    or a hub id. Without it both read as transformers' "Repo id must be in the form 'repo_name' or
    'namespace/repo_name'", which never says the path is wrong."""
    path = Path(name)
    if _on_disk(path) and path.is_file():
        return (f"{name!r} is a file; it must be a folder saved by save_pretrained (config.json and the "
                "weights) or a hub id (org/name)")
    if _on_disk(path) or is_hub_id(name):
        return None
    tilde = " (a leading ~ is not expanded)" if name.startswith("~") else ""
    return f"no such folder {name!r}{tilde}, and it is not a hub id (org/name) either"


def absolute_model(name: str) -> str:
    """`name` (what ``from_pretrained`` loads) as an absolute path, against the working directory now, when it names
    a local one: something of that name on disk, or a path starting with "." (no hub id does); a hub id, an absolute
    path and a "~" path (transformers does not expand it: `local_path_problem` says so) are returned unchanged. A
    model loads on first use, maybe in another working directory than the one its name was given in."""
    if name.startswith("~") or Path(name).is_absolute():
        return name
    if name.startswith(".") or _on_disk(Path(name)):
        return os.path.abspath(name)
    return name


def absolute_path(path: str | Path | None) -> Path | None:
    """`path` (``~`` expanded) as an absolute path against the working directory now (None stays None): a
    checkpoint or a folder named relative to where it was given, for a model that loads later."""
    return Path(os.path.abspath(os.path.expanduser(path))) if path else None


def hub_reachable(endpoint: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether the hub at `endpoint` (default huggingface_hub's ``ENDPOINT``) answers an HTTP request
    within `timeout_s`, name lookup included (it runs in a helper thread, which is left behind when it
    hangs)."""
    import httpx
    from huggingface_hub import constants

    url = endpoint or constants.ENDPOINT
    answered = threading.Event()

    def ask() -> None:
        try:
            httpx.head(url, timeout=timeout_s)
            answered.set()
        except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError):  # InvalidURL: a malformed endpoint
            pass

    thread = threading.Thread(target=ask, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return answered.is_set()


def cached_file(repo_id: str, name: str, revision: str | None = None) -> Path | None:
    """The local copy of file `name` of hub model `repo_id` at `revision` (a branch, tag or commit; None: the
    default branch) in the Hugging Face cache, None when it is not there (no request; an invalid repo id
    raises huggingface_hub's HFValidationError, a ValueError)."""
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(repo_id, name, revision=revision)
    return Path(hit) if isinstance(hit, str) else None


def download_blocked() -> str | None:
    """Why a file missing from the cache cannot be downloaded now ("HF_HUB_OFFLINE is set", or the hub did
    not answer `hub_reachable`), or None when the hub answers: what `raa doctor` and `--check` tell."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    return None if hub_reachable() else f"the hub did not answer ({constants.ENDPOINT})"


def hub_load_kwargs(name: str, *, endpoint: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, Any]:
    """Extra ``from_pretrained`` arguments for `name`: ``{"local_files_only": True}`` when it is a hub id
    and the hub does not answer (see the module docstring), else none."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or not is_hub_id(name) or hub_reachable(endpoint, timeout_s):
        return {}
    return {"local_files_only": True}
