"""`raa doctor`'s checks of the evidence tools (graph/doctor.py runs them): the motion tracker and the V-JEPA 2
weights where they would load in this process, and the tool service when ``RAA_TOOLS_URL`` is set (its module
docstring says what each status means). Nothing loads model weights (V-JEPA 2's are checked by name); a hub is only asked whether it answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from graph.doctor_check import Check
from graph.model_files import vjepa_weights_missing, weights_problem

if TYPE_CHECKING:  # pragma: no cover
    from tools.settings import ToolSettings

COTRACKER3_HUB_WEIGHTS = "scaled_offline.pth"
"""The file co-tracker's hubconf downloads for `cotracker3_offline(pretrained=True)` (torch hub cache)."""
COTRACKER3_WEIGHTS_URL = f"https://huggingface.co/facebook/cotracker3/resolve/main/{COTRACKER3_HUB_WEIGHTS}"
"""Where it downloads it from (co-tracker's hubconf.py)."""


def tracker_check(tools: ToolSettings) -> Check:
    """What `tools.motion.cotracker.CoTracker3Tracker._build` will load: a checkpoint file; a hub dir (a
    co-tracker clone: `torch.hub.load(..., source="local")` reads its hubconf.py) whose weights are the
    checkpoint or, without one, downloaded by hubconf on first use; or, without a hub dir, the installed
    `cotracker` package."""
    if tools.tools_url:
        return Check("motion tracker", "skipped", f"runs in the tool service ({tools.tools_url})")
    if tools.motion_backend == "lk":
        return Check("motion tracker", "ok", "Lucas-Kanade (OpenCV, no weights)")
    checkpoint, hub = tools.cotracker_checkpoint, tools.cotracker_hub_dir
    if checkpoint is None and hub is None:
        return Check("motion tracker", "problem", "cotracker3 needs RAA_COTRACKER_CHECKPOINT (offline .pth) or "
                                                  "RAA_COTRACKER_HUB_DIR (a local co-tracker clone)")
    problems = []
    if checkpoint is not None and not Path(checkpoint).is_file():
        why = "is not a file" if Path(checkpoint).exists() else "does not exist"
        problems.append(f"RAA_COTRACKER_CHECKPOINT {checkpoint} {why} (the offline model's .pth)")
    if hub is not None and not (Path(hub) / "hubconf.py").is_file():
        why = "has no hubconf.py" if Path(hub).is_dir() else "does not exist"
        problems.append(f"RAA_COTRACKER_HUB_DIR {hub} {why} (a clone of facebookresearch/co-tracker is expected)")
    if hub is None and not problems:
        import importlib.util

        if importlib.util.find_spec("cotracker") is None:
            problems.append("without RAA_COTRACKER_HUB_DIR the installed cotracker package is used, and it is not "
                            "installed (install it, or set RAA_COTRACKER_HUB_DIR to a co-tracker clone)")
    if problems:
        return Check("motion tracker", "problem", "cotracker3: " + "; ".join(problems))
    if checkpoint is None:
        import torch

        from tools.hub import hub_reachable

        cached = Path(torch.hub.get_dir()) / "checkpoints" / COTRACKER3_HUB_WEIGHTS
        if not cached.is_file():
            fetch = (f"cotracker3 ({hub}): RAA_COTRACKER_CHECKPOINT is unset, so the first use downloads the weights "
                     f"({COTRACKER3_HUB_WEIGHTS}, network) into {cached.parent}")
            if not hub_reachable(COTRACKER3_WEIGHTS_URL):  # the hubconf's fixed URL (no HF_ENDPOINT, no offline mode)
                return Check("motion tracker", "problem", f"{fetch}, and {COTRACKER3_WEIGHTS_URL} did not answer: "
                             "download it there, or set RAA_COTRACKER_CHECKPOINT to a local .pth")
            return Check("motion tracker", "warning", f"{fetch}; or set RAA_COTRACKER_CHECKPOINT to a local .pth")
        return Check("motion tracker", "ok", f"cotracker3 ({hub}, weights in the torch hub cache: {cached})")
    return Check("motion tracker", "ok", f"cotracker3 ({checkpoint}" + (f", {hub})" if hub else ")"))


def vjepa_check(tools: ToolSettings) -> Check:
    """What `tools.surprise.VJEPA2SurpriseScorer.load` reads with `VJEPA2Model.from_pretrained`: a local folder
    must hold config.json and the weights (else a problem), and every weight of the model
    (`graph.model_files.vjepa_weights_missing`: the loader faults on one missing, e.g. an encoder-only export);
    a hub id not (fully) in the cache is a warning, as the first run downloads what is missing."""
    if tools.tools_url:
        return Check("V-JEPA 2 weights", "skipped", f"loaded by the tool service ({tools.tools_url})")
    local = Path(tools.vjepa_model)
    if local.is_dir():
        def here(name: str) -> Path | None:
            return local / name if (local / name).is_file() else None

        if (why := weights_problem(here) or vjepa_weights_missing(here)) is not None:
            return Check("V-JEPA 2 weights", "problem", f"{local}: {why}; RAA_VJEPA_MODEL needs a folder saved by "
                                                        "save_pretrained from a whole VJEPA2Model, or a hub id")
        return Check("V-JEPA 2 weights", "ok", f"{local}")
    if _names_a_path(tools.vjepa_model):  # no hub id starts with / . or ~: the folder is missing
        what = "is a file, not a folder" if local.exists() else "the path does not exist"
        return Check("V-JEPA 2 weights", "problem", f"RAA_VJEPA_MODEL={tools.vjepa_model}: {what}; {VJEPA_FIX}")
    from tools.hub import cached_file, download_blocked

    def cached(name: str) -> Path | None:
        return cached_file(tools.vjepa_model, name)

    try:
        why = weights_problem(cached)
    except ValueError:  # not a valid repo id either (huggingface_hub's reason is about repo id syntax)
        return Check("V-JEPA 2 weights", "problem", f"RAA_VJEPA_MODEL={tools.vjepa_model}: neither an existing "
                                                    f"folder nor a hub id (owner/name); {VJEPA_FIX}")
    if why is None:  # every file is cached: nothing would be downloaded, so missing weights stay missing
        if (lacks := vjepa_weights_missing(cached)) is not None:
            return Check("V-JEPA 2 weights", "problem", f"{tools.vjepa_model} (in the Hugging Face cache): {lacks}")
        return Check("V-JEPA 2 weights", "ok", f"{tools.vjepa_model} (in the Hugging Face cache)")
    where = "is not in the Hugging Face cache" if cached("config.json") is None else \
        f"is only partly in the Hugging Face cache ({why})"
    # the loader (tools.surprise, tools.hub) reads only the cache when the hub does not answer: the run stops
    if cannot := download_blocked():
        return Check("V-JEPA 2 weights", "problem", f"RAA_VJEPA_MODEL={tools.vjepa_model} {where} and {cannot}, so "
                     f"{_wmreward_presets()} stop at start: score with "
                     f"--preset no_wmreward, or download it (hf download {tools.vjepa_model}) or set "
                     "RAA_VJEPA_MODEL to a local folder")
    return Check("V-JEPA 2 weights", "warning", f"{tools.vjepa_model} {where}: the first run of a preset with "
                 "WMReward downloads it (network), or set RAA_VJEPA_MODEL to a local folder")


VJEPA_FIX = ("set RAA_VJEPA_MODEL to a local V-JEPA 2 folder (config.json and the weights, saved by save_pretrained "
             "from a whole VJEPA2Model) or to a hub id in the Hugging Face cache or downloadable "
             "(hf download facebook/vjepa2-vitl-fpc64-256), or score with --preset no_wmreward")
"""What RAA_VJEPA_MODEL takes, said when it names neither (`vjepa_check`)."""


def _names_a_path(model: str) -> bool:
    """True for a value only a filesystem path can be (absolute, or starting with . or ~): never a hub id."""
    return Path(model).is_absolute() or model.startswith((".", "~"))


def _wmreward_presets() -> str:
    from graph.config import presets_using

    return f"presets {', '.join(presets_using('wmreward'))} (WMReward)"


def service_check(tools: ToolSettings) -> Check:
    if not tools.tools_url:
        return Check("tool service", "skipped", "tools run in this process (RAA_TOOLS_URL unset)")
    import httpx

    url = f"{tools.tools_url.rstrip('/')}/healthz"
    try:
        resp = httpx.get(url, timeout=tools.connect_timeout_s)
    except httpx.HTTPError as exc:
        return Check("tool service", "problem", f"{url}: {type(exc).__name__}: {exc}")
    if resp.status_code != 200:
        return Check("tool service", "problem", f"{url}: HTTP {resp.status_code}")
    from tools.client import ToolServiceClient
    from tools.errors import ToolFault

    with ToolServiceClient(tools.tools_url, token=tools.token(), timeout_s=tools.request_timeout_s,
                           connect_timeout_s=tools.connect_timeout_s, retries=1) as client:
        try:  # /v1/info, as `graph.context.preload_tools` asks it for the motion tracker
            client.check_serves("motion")
        except ToolFault as exc:  # refused (token) or failing: every preset with a tool stops at start
            return Check("tool service", "problem", f"{exc.message}: every preset with motion evidence or WMReward "
                                                    "stops at start; check RAA_TOOLS_TOKEN (the service's --token) "
                                                    "and RAA_TOOLS_URL")
        try:
            client.check_serves("surprise")
        except ToolFault as exc:  # a service started with --no-surprise
            return Check("tool service", "warning", f"{exc.message}: {_wmreward_presets()} will stop at start")
    return Check("tool service", "ok", f"{tools.tools_url} answers and serves tracks and surprise")
