"""Videos from a trained (or the base) policy, ready for the reward agent and the evals.

    python -m training.generate --policy runs/x/final --out out/trained [--samples 4] [--seed 0]
    python -m training.generate --policy runs/x/final --out out/base --weights base   # same noise, base model
    raa score-batch out/trained/manifest.jsonl --out out/trained/scores.jsonl

``generate`` loads an export (training/export.py), encodes each prompt (initial frame + text, at the
run's size and frame count), samples, decodes with the model's VAE and writes
``OUT/videos/pNNNN_sMM.mp4`` plus one ``OUT/manifest.jsonl`` row per video: ``path`` (relative to
OUT) and ``instruction``, as ``raa score-batch`` reads them, and ``prompt``,
``sample``, ``seed``, ``weights``, ``sampler``, ``iteration``, after the prompt's own extra fields
(``PromptSpec.meta``: e.g. ``task`` and ``questions``, which make the manifest one that
``raa eval world-model`` reads, for PAI-Bench-style VQA on the generated videos).

Decisions where the issue was silent:

* Samplers (``sampler``): ``ode`` (default) is the deterministic flow sampler
  (``policy.rollout.sample_ode``) over the run's schedule: what a world model is evaluated with.
  ``dyndiff`` draws the training rollouts (``policy.rollout.rollout`` with the run's SDE window,
  tau and r_base), to look at what the policy explored. Both use the run's classifier-free
  guidance (``guidance_scale``, ``negative_prompt``) unless overridden.
* Every video's noise comes from its own generator seeded by ``(seed, prompt index, sample)``
  (``training.data.sample_seed``, the held-out evaluation's seeds; generate.json records it as ``noise``), so
  ``--weights trained`` and ``--weights base`` with the same seed start from the same noise (paired
  before/after comparisons), and a video does not depend on which others are generated with it. The numbers
  also depend on the generator's device (CPU and CUDA draw others for one seed): generate.json and each row
  record it (``noise_device``), and a resume on the other device is refused (a folder from before it was
  recorded is taken to be of the device it resumes on).
  One video at a time by default (full-size video models sample at batch 1 on one GPU);
  ``--batch_size N`` samples up to N videos of one prompt together with the ODE sampler (each still
  from its own noise; the batched transformer may round differently, so pixels can differ from
  batch 1 by a quantisation step). DynDiff draws its step noise per batch, so it stays at batch 1.
* Prompts default to the run's own (``dataset`` + ``dataset_file``, in that order);
  ``--prompts FILE.jsonl`` takes the training prompt format (``{"text", "image"?, "image_seed"?}``).
* Resumable (`training.generate_folder`): ``OUT/generate.json`` records the settings (the prompts by digest,
  their extra fields included, since those go into the manifest rows; the policy by its folder and export.json's
  iteration, ``source`` checkpoint and ``created`` time); a rerun with the same settings skips videos already in
  the manifest, and one with other settings or prompts is refused (a folder never mixes policies, samplers,
  seeds or prompt lists), unless it holds no row and no video yet (a first call that failed before its first
  video, loading the model say), as a training ``output_dir`` with no checkpoint or metrics row. Each video is
  written whole or not at all (``tools.video.write_video`` encodes to a temporary name and renames it), then its
  row is appended; a rerun drops a torn last row, so an interrupted run leaves no half-written video or line in
  the manifest.
* A row's ``iteration`` is the export's for ``--weights trained`` and 0 for ``--weights base``: the base model
  is the policy before its first update, the held-out evaluation's iteration-0 baseline (generate.json keeps
  the export's, as part of the policy folder's identity); an older base folder's rows are set to 0 at a resume.
* Every prompt with videos still to write is encoded first (`encode_all`; the conditionings wait in
  host memory), then the text encoder (and Wan 2.1 I2V's CLIP image encoder) moves off the device for the
  sampling, which never needs it: with a full-size model that frees its 10-15 GB for the transformer and the VAE
  decode.
* ``--out`` inside an export folder is refused: an export replaces its folder whole (training/export.py).
* Nothing is lost to one bad prompt: a prompt whose image is missing or a sample that fails is
  recorded in ``OUT/failed.jsonl`` with its reason, the others are written, and the command exits 1.
  A clip whose latents are not finite (a diverged policy) is such a failure, of that clip alone
  (`policy.vae.NonFiniteLatentsError`; it used to be written as a black video): `sample_videos` returns the
  error in its place, so the other clips of its batch are still written.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from policy.conditioning import Conditioning
from policy.rollout import RolloutConfig, RolloutConfigError, initial_noise, rollout, sample_ode
from policy.vae import NonFiniteLatentsError
from policy.world_model import FlowWorldModel
from tools.video import write_video
from training.config import PromptSpec, TrainConfig
from training.data import SAMPLE_NOISE, load_prompts, sample_seed
from training.export import ExportError, load_policy
from training.export_folder import read_export
from training.generate_folder import GenerateError, claim_folder, resume_keys
from training.models import encode_prompt, release_text_encoder
from training.run_dir import enclosing_export
from training.sampler_shift import sampling_shift
from training.update import rollout_config

Sampler = Literal["ode", "dyndiff"]
Weights = Literal["trained", "base"]


@dataclass
class GenerateSummary:
    """What one `generate` call did."""

    out: Path
    """The output folder (videos/, manifest.jsonl, generate.json, failed.jsonl)."""
    written: int = 0
    """Videos generated by this call."""
    skipped: int = 0
    """Videos already in the manifest (an earlier, interrupted call)."""
    failed: list[dict[str, Any]] = field(default_factory=list)
    """One entry per prompt or sample that could not be generated: key, prompt, sample, reason."""

    @property
    def manifest(self) -> Path:
        return self.out / "manifest.jsonl"


def video_key(prompt: int, sample: int) -> str:
    """Name (and resume key) of one video: prompt index and sample number."""
    return f"p{prompt:04d}_s{sample:02d}"


def generate(policy: Path, out: Path, *, prompts: list[PromptSpec] | None = None, samples: int = 1,
             seed: int = 0, weights: Weights = "trained", sampler: Sampler = "ode",
             num_steps: int | None = None, guidance_scale: float | None = None,
             negative_prompt: str | None = None, device: str = "cpu", progress: bool = False,
             batch_size: int = 1) -> GenerateSummary:
    """Generate `samples` videos per prompt with the exported policy at `policy` into `out`
    (`num_steps`, `guidance_scale`, `negative_prompt`: None = the run's; `batch_size`: samples of one
    prompt sampled together, ODE sampler only)."""
    if samples < 1:
        raise GenerateError(f"samples must be >= 1, got {samples}")
    if seed < 0:  # numpy's SeedSequence refuses it, but only after the model loaded and generate.json was written
        raise GenerateError(f"seed (--seed) must be a non-negative integer, got {seed}")
    if batch_size < 1 or (batch_size > 1 and sampler != "ode"):
        raise GenerateError(f"batch_size must be >= 1, and 1 with the dyndiff sampler (its step noise is drawn "
                            f"per batch), got {batch_size} with {sampler}")
    info, cfg = read_export(policy)
    try:
        shift = sampling_shift(cfg)
    except RolloutConfigError as exc:  # before generate.json records it and every video fails on it
        raise GenerateError(f"{policy}: its export.json config: {exc}") from None
    steps = cfg.num_steps if num_steps is None else num_steps
    guidance = cfg.guidance_scale if guidance_scale is None else guidance_scale
    negative = (cfg.negative_prompt if negative_prompt is None else negative_prompt) if guidance != 1.0 else None
    rcfg = _sampler_config(cfg, sampler, steps, guidance)
    prompt_list = load_prompts(cfg.dataset, cfg.dataset_file) if prompts is None else list(prompts)
    out = Path(out)
    if (home := enclosing_export(out)) is not None:  # a later export there deletes the videos and scores
        raise GenerateError(f"--out {out} is inside the policy export {home}: the next export there (a run's end, "
                            "`python -m training.export`) replaces it whole, videos and scores included; choose a "
                            f"folder outside it, e.g. {home.parent / 'samples'}")
    # a prompt's extra fields (VQA questions, task) go into its manifest rows, so they are part of the prompts; a
    # prompt without any keeps the digest it had before they were counted (an older folder still resumes)
    listed = json.dumps([[p.text, p.image, p.image_seed] + ([p.meta] if p.meta else []) for p in prompt_list],
                        sort_keys=True, default=str)
    # the export is known by its folder, and by the checkpoint it came from and when (export.json): another
    # checkpoint of the same iteration exported into the same folder is another policy
    settings = {"policy": str(Path(policy).resolve()), "iteration": info.get("iteration"),
                "source": info.get("source"), "created": info.get("created"), "weights": weights,
                "sampler": sampler, "seed": seed, "num_steps": steps, "shift": shift,
                "num_frames": cfg.num_frames, "height": cfg.height, "width": cfg.width,
                "guidance_scale": guidance, "negative_prompt": negative,
                "prompts_sha256": hashlib.sha256(listed.encode()).hexdigest(), "noise": SAMPLE_NOISE,
                "noise_device": torch.device(device).type}  # a CUDA generator draws other numbers than a CPU one
    claim_folder(out, settings)
    iteration = info.get("iteration") if weights == "trained" else 0  # the base: the policy before its first update
    summary = GenerateSummary(out)
    done = resume_keys(summary.manifest, iteration)
    model, _, _ = load_policy(policy, device, weights)
    videos = out / "videos"
    videos.mkdir(exist_ok=True)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(prompt_list) * samples, desc="generate", unit="video")
    work = {i: [(j, k) for j, k in enumerate(video_key(i, j) for j in range(samples)) if k not in done]
            for i in range(len(prompt_list))}
    conds = encode_all(model, cfg, {i: prompt_list[i] for i, todo in work.items() if todo}, negative, device)
    with summary.manifest.open("a", encoding="utf-8") as manifest:
        for i, spec in enumerate(prompt_list):
            todo = work[i]
            summary.skipped += samples - len(todo)
            cond = conds.get(i)  # None: every video of this prompt was written before (nothing to encode)
            if isinstance(cond, Exception):  # a bad prompt (missing image, unreadable file): its videos only
                summary.failed += [_failure(k, i, j, cond) for j, k in todo]
            elif cond is not None:
                cond = cond.to(device)
                for start in range(0, len(todo), batch_size):
                    chunk = todo[start:start + batch_size]
                    seeds = [sample_seed(seed, i, j) for j, _ in chunk]
                    try:
                        if sampler == "ode":
                            clips = sample_videos(model, cond, steps, shift, seeds, guidance)
                        else:
                            clips = [sample_video(model, cond, sampler, rcfg, steps, shift, seeds[0], guidance)]
                    except Exception as exc:  # e.g. out of memory on one batch: the others go on
                        summary.failed += [_failure(key, i, j, exc) for j, key in chunk]
                        continue
                    for (j, key), video_seed, frames in zip(chunk, seeds, clips, strict=True):
                        if isinstance(frames, NonFiniteLatentsError):  # a diverged clip: never written as a video
                            summary.failed.append(_failure(key, i, j, frames))
                            continue
                        try:
                            write_video(videos / f"{key}.mp4", frames, fps=cfg.fps)  # never a cut file at that name
                        except Exception as exc:  # a full disk, say: this clip's row is not written
                            summary.failed.append(_failure(key, i, j, exc))
                            continue
                        row = {**spec.meta, "path": f"videos/{key}.mp4", "instruction": spec.text, "key": key,
                               "prompt": i, "sample": j, "seed": video_seed, "weights": weights, "sampler": sampler,
                               "iteration": iteration, "noise_device": settings["noise_device"]}
                        manifest.write(json.dumps(row) + "\n")
                        manifest.flush()
                        summary.written += 1
            if bar is not None:
                bar.update(samples)
    if bar is not None:
        bar.close()
    (out / "failed.jsonl").write_text("".join(json.dumps(f) + "\n" for f in summary.failed), encoding="utf-8")
    return summary


def encode_all(model: FlowWorldModel, cfg: TrainConfig, prompts: dict[int, PromptSpec],
               negative: str | None, device: str) -> dict[int, Conditioning | Exception]:
    """Every prompt's conditioning (index -> its conditioning in host memory, or the exception that
    encoding it raised), encoded before any sampling; then the text encoder (and the CLIP image encoder, if
    any) leaves the device, where sampling never needs it (the umT5-XXL or Cosmos-Reason1 encoder of a
    full-size model is 10-15 GB that the transformer's activations and the VAE decode can use instead)."""
    conds: dict[int, Conditioning | Exception] = {}
    with torch.no_grad():
        for i, spec in prompts.items():
            try:
                conds[i] = encode_prompt(model, cfg, spec, negative).to("cpu")
            except Exception as exc:  # a bad prompt (missing image, unreadable file): reported with its videos
                conds[i] = exc
    release_text_encoder(model, device)
    return conds


def sample_video(model: FlowWorldModel, cond: Conditioning, sampler: Sampler, rcfg: RolloutConfig | None,
                 num_steps: int, shift: float, seed: int, guidance_scale: float = 1.0) -> np.ndarray:
    """One clip uint8 [T, H, W, 3] for a one-prompt conditioning: noise from a generator seeded with
    `seed`, then the ODE sampler (with `guidance_scale`) or a DynDiff rollout (`rcfg`, which carries its
    own), decoded by the model's VAE."""
    if sampler == "ode":
        clip = sample_videos(model, cond, num_steps, shift, [seed], guidance_scale)[0]
        if isinstance(clip, NonFiniteLatentsError):
            raise clip
        return clip
    if rcfg is None:
        raise GenerateError("the dyndiff sampler needs a RolloutConfig")
    gen = torch.Generator(device=cond.first_frame_latent.device).manual_seed(seed)
    with torch.no_grad():
        return model.decode(rollout(model, cond, rcfg, generator=gen).latents)[0]


def sample_videos(model: FlowWorldModel, cond: Conditioning, num_steps: int, shift: float, seeds: list[int],
                  guidance_scale: float = 1.0) -> list[np.ndarray | NonFiniteLatentsError]:
    """ODE clips of one prompt, one per seed, sampled as one batch: each clip's noise comes from its own
    generator (`seed`), exactly the noise `sample_video` draws, so a clip does not depend on the batch it
    is in (up to floating-point rounding of the batched transformer). Decoded one clip at a time; a clip whose
    latents are not finite is its NonFiniteLatentsError instead (the others are still decoded)."""
    return decode_each(model, ode_latents(model, cond, num_steps, shift, seeds, guidance_scale))


def ode_latents(model: FlowWorldModel, cond: Conditioning, num_steps: int, shift: float, seeds: list[int],
                guidance_scale: float = 1.0) -> Tensor:
    """The final latents of `sample_videos` (its transformer forwards, no decode): one per seed, in a batch."""
    device = cond.first_frame_latent.device
    noise = torch.cat([initial_noise(cond, torch.Generator(device=device).manual_seed(s)) for s in seeds])
    with torch.no_grad():
        return sample_ode(model, cond.repeat_interleave(len(seeds)), num_steps, shift, noise=noise,
                          guidance_scale=guidance_scale)


def decode_each(model: FlowWorldModel, latents: Tensor) -> list[np.ndarray | NonFiniteLatentsError]:
    """Each clip of ``latents`` decoded on its own (no transformer forward), or its NonFiniteLatentsError."""
    with torch.no_grad():
        return [_decoded(model, latents[k:k + 1]) for k in range(latents.shape[0])]


def _decoded(model: FlowWorldModel, latent: Tensor) -> np.ndarray | NonFiniteLatentsError:
    try:
        return model.decode(latent)[0]
    except NonFiniteLatentsError as exc:
        return exc


def _failure(key: str, prompt: int, sample: int, exc: Exception) -> dict[str, Any]:
    return {"key": key, "prompt": prompt, "sample": sample, "reason": f"{type(exc).__name__}: {exc}"}


def _sampler_config(cfg: TrainConfig, sampler: Sampler, steps: int, guidance: float) -> RolloutConfig | None:
    if steps < 1:
        raise GenerateError(f"num_steps must be >= 1, got {steps}")
    if not guidance >= 0:
        raise GenerateError(f"guidance_scale must be >= 0, got {guidance}")
    if sampler == "ode":
        return None
    if sampler != "dyndiff":
        raise GenerateError(f"sampler must be 'ode' or 'dyndiff', got {sampler!r}")
    try:
        return rollout_config(cfg, num_steps=steps, guidance_scale=guidance)  # as the run's rollouts sampled
    except RolloutConfigError as exc:
        raise GenerateError(f"dyndiff sampler with num_steps {steps}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring); exit 0 when every video was written, 1 when some failed,
    2 on a usage or settings error."""
    import argparse

    from training.config import ConfigError

    parser = argparse.ArgumentParser(prog="python -m training.generate",
                                     description="Generate videos with an exported policy (training/export.py).")
    parser.add_argument("--policy", required=True, type=Path, help="export folder, e.g. runs/x/final")
    parser.add_argument("--out", required=True, type=Path, help="output folder (videos/, manifest.jsonl)")
    parser.add_argument("--prompts", type=Path, help="JSONL of prompts {text, image?, image_seed?} "
                                                     "(default: the run's training prompts)")
    parser.add_argument("--samples", type=int, default=1, help="videos per prompt (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the noise (default 0)")
    parser.add_argument("--weights", choices=["trained", "base"], default="trained",
                        help="trained policy (default) or the base model it started from")
    parser.add_argument("--sampler", choices=["ode", "dyndiff"], default="ode",
                        help="deterministic flow sampler (default) or the training's DynDiff rollouts")
    parser.add_argument("--num_steps", type=int, help="denoising steps (default: the run's num_steps)")
    parser.add_argument("--guidance_scale", type=float,
                        help="classifier-free guidance weight, 1 = off (default: the run's guidance_scale)")
    parser.add_argument("--negative_prompt", help="negative prompt of the guidance (default: the run's)")
    parser.add_argument("--batch_size", type=int, default=1,
                        help="samples of one prompt sampled together (ODE sampler; default 1)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where to sample (default auto: cuda when available); noise drawn on cpu and cuda differs")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    device = "cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()) else "cpu"
    try:
        prompts = load_prompts([], str(args.prompts)) if args.prompts is not None else None
        summary = generate(args.policy, args.out, prompts=prompts, samples=args.samples, seed=args.seed,
                           weights=args.weights, sampler=args.sampler, num_steps=args.num_steps,
                           guidance_scale=args.guidance_scale, negative_prompt=args.negative_prompt, device=device,
                           progress=sys.stderr.isatty(), batch_size=args.batch_size)
    except (ExportError, GenerateError, ConfigError, OSError, ValueError) as exc:  # OSError: e.g. --out is a file
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{summary.written} video(s) written, {summary.skipped} already there, {len(summary.failed)} failed; "
          f"manifest: {summary.manifest}")
    for failure in summary.failed[:5]:
        print(f"  failed {failure['key']}: {failure['reason'][:300]}", file=sys.stderr)
    if summary.failed:
        print(f"  all failures: {summary.out / 'failed.jsonl'}", file=sys.stderr)
    print(f"score them: raa score-batch {summary.manifest} --out {summary.out / 'scores.jsonl'}")
    return 1 if summary.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
