"""Reading a TrainConfig from YAML and the command line, and writing one back.

``load_config(path, overrides)`` reads the YAML file, applies ``--field value`` overrides and
validates everything (``training.config_checks.validate``) before any model is loaded.

Command line (``parse_cli``)::

    --config FILE            YAML file (optional; defaults otherwise)
    --FIELD VALUE | --FIELD=VALUE
                             any TrainConfig field, converted by the field's declared type
    --resume / --tiny ...    a bool field given without a value means true
    --local_rank N           accepted and ignored (the deepspeed launcher adds it)

A field (or ``--config``) followed by another option instead of its value is a ConfigError (`_is_option`):
``--FIELD=VALUE`` gives a value that starts with ``--``.

Conversion is explicit over ``dataclasses.fields``: bool ("true/false/1/0/yes/no"), int, float, str,
Literal (must be one of the choices), ``X | None`` ("none"/"null" -> None), and YAML text for the
container fields (``--sde_window "[0, 2]"``, ``--reward_options "{region: [0, 0, 1, 0.5]}"``).
A number must be a YAML number: ``image_seed: "3"`` or ``max_iterations: '7'`` (a quoted string, in the file,
in a ``dataset`` / ``eval_dataset`` prompt or in a ``--dataset "[...]"`` list) is a ConfigError naming the
field (``dataset[0].image_seed``), as a JSONL prompt row's is (training.data.prompt_from_row); it was
converted silently. Only a command-line value itself is text to convert (``--max_iterations 7``). The YAML
reader takes ``1e-4`` as the float it means (YAML 1.2; PyYAML's YAML 1.1 reads a float without a dot as a
string, which the old conversion covered) (`YamlLoader`).
``config_to_dict`` / ``config_from_dict`` round-trip a config through plain YAML / JSON values (the
trainer's ``output_dir/config.yaml``, an export's ``export.json``).

A run's saved config lists every field. One written before a field existed is read with what the code
did then (``FIELD_DEFAULTS_BEFORE``), not the field's current default: ``read_run_config`` (a run's
``config.yaml``), ``saved_config_dict`` (any saved mapping). ``config_changes`` lists what a resumed
launch changes against the run's saved config (training/config_resume.py); the trainer prints it, since a changed
setting (a different ``image_fit``, learning rate or reward) silently makes the rest of the run another experiment.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from tools.file_kinds import read_at
from training.config import ConfigError, PromptSpec, TrainConfig
from training.config_checks import validate
from training.prompt_checks import is_blank_file

FIELD_DEFAULTS_BEFORE: dict[str, Any] = {"image_fit": "stretch", "reward_timeout_s": None,
                                         "prompt_order": "seed_plus_epoch", "shift": 3.0}
"""Fields added after runs were saved, with the behaviour of the code before them (prompt images were
stretched to height x width before ``image_fit``; a reward call had no time limit before ``reward_timeout_s``;
epoch e's prompts were drawn from seed + e before ``prompt_order``), or whose default changed (``shift`` was 3.0
before None, the checkpoint's: a saved config always holds the number, training/sampler_shift.py)."""


class YamlLoader(yaml.SafeLoader):
    """yaml.SafeLoader that also reads an exponent float without a dot (``1e-4``, YAML 1.2) as a float."""


YamlLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"),
                                 list("-+0123456789"))


def _bool(text: str, name: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}: expected a boolean (true/false), got {text!r}")


def _coerce(value: Any, tp: Any, name: str, text: bool = False) -> Any:
    """Convert ``value`` (a YAML value, or with ``text`` a command-line string) to the declared type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null")):
            return None
        return _coerce(value, inner[0], name, text)
    if origin is Literal:
        if isinstance(value, bool):  # YAML 1.1 reads an unquoted on/off, yes/no, true/false as a boolean
            words = [w for w in (("on", "yes", "true") if value else ("off", "no", "false")) if w in args]
            if len(words) != 1:
                raise ConfigError(f"{name}: must be one of {list(args)}, got the boolean {value!r} (YAML reads "
                                  "an unquoted on/off, yes/no or true/false as one: quote the value)")
            value = words[0]
        if value not in args:
            raise ConfigError(f"{name}: must be one of {list(args)}, got {value!r}")
        return value
    if isinstance(value, str) and tp not in (str,) and origin in (list, tuple, dict):
        value = yaml.load(value, Loader=YamlLoader)  # noqa: S506 (a SafeLoader)
    if tp is bool:
        if isinstance(value, str):
            return _bool(value, name)
        if not isinstance(value, bool):  # a YAML 0 / 1 is a number, refused as a quoted number is for an int
            raise ConfigError(f"{name}: expected a boolean (true/false), got {value!r}")
        return value
    if tp in (int, float) and isinstance(value, str) and not text:
        kind = "an integer" if tp is int else "a number"
        raise ConfigError(f"{name}: expected {kind}, got the string {value!r} (write the number without quotes)")
    if tp is int:
        try:
            return int(value) if isinstance(value, str) else _strict(value, int, name)
        except ValueError:
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from None
    if tp is float:
        try:
            return float(value) if isinstance(value, str) else float(_strict(value, (int, float), name))
        except ValueError:
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if tp is str:
        return _strict(value, str, name)
    if origin is tuple:
        if not isinstance(value, list | tuple) or len(value) != len(args):
            raise ConfigError(f"{name}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, f"{name}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{name}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is PromptSpec:
        if isinstance(value, PromptSpec):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping with 'text', got {value!r}")
        return _build(PromptSpec, value, name)
    raise ConfigError(f"{name}: unsupported field type {tp!r}")  # pragma: no cover


def _strict(value: Any, tp: type | tuple[type, ...], name: str) -> Any:
    if isinstance(value, bool) and tp is not bool:
        raise ConfigError(f"{name}: expected {tp}, got a boolean {value!r}")
    if not isinstance(value, tp):
        raise ConfigError(f"{name}: expected {tp}, got {value!r}")
    return value


def _did_you_mean(unknown: Sequence[str], names: Sequence[str], prefix: str = "") -> str:
    """" (did you mean --learning_rate?)" for the unknown names with a close valid one, else ""."""
    guesses = [f"{prefix}{m[0]}" for u in unknown if (m := difflib.get_close_matches(u, names, n=1, cutoff=0.75))]
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"{where or 'config'}: unknown field(s) {unknown}{_did_you_mean(unknown, names)}; "
                          f"valid fields: {names}")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(f"{where or cls.__name__}: {exc}") from None


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Merge ``--field value`` / ``--field=value`` / bare ``--boolfield`` tokens into ``data``."""
    hints = typing.get_type_hints(TrainConfig)
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    out = dict(data)
    toks = list(overrides)
    i = 0
    while i < len(toks):
        tok = toks[i]
        if not tok.startswith("--"):
            raise ConfigError(f"unexpected argument {tok!r} (expected --field value)")
        key, eq, val = tok[2:].partition("=")
        key = key.replace("-", "_")
        if key == "local_rank":  # added by the deepspeed launcher; rank comes from the environment
            i += 1 if eq else 2
            continue
        if key not in names:
            raise ConfigError(f"unknown option --{key}{_did_you_mean([key], names, '--')}; valid fields: {names}")
        if not eq:
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            if hints[key] is bool and (nxt is None or nxt.startswith("--")):
                out[key], i = True, i + 1
                continue
            if nxt is None:
                raise ConfigError(f"--{key} needs a value")
            if (option := nxt.partition("=")[0]) and _is_option(option, names):
                raise ConfigError(f"--{key} needs a value, got the option {option} (an empty shell variable? "
                                  f"write --{key}=VALUE for a value that starts with --)")
            val, i = nxt, i + 2
        else:
            i += 1
        out[key] = _coerce(val, hints[key], key, text=True)
    return out


_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(TrainConfig))


def _is_option(token: str, names: Sequence[str]) -> bool:
    """Whether ``token`` is one of the command line's options (``--FIELD``, ``--config``, ``--check``,
    ``--local_rank``, ``--help``): after a field that needs a value it means the value is missing (with ``OUT``
    unset, ``--output_dir $OUT --resume`` was a fresh run into a folder named ``--resume``); another text that
    starts with ``--`` is a value."""
    name = token.removeprefix("--").replace("-", "_")
    return token.startswith("--") and (name in names or name in ("config", "check", "local_rank", "help"))


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """YAML file (or defaults) + overrides -> a validated TrainConfig."""
    data = read_mapping(Path(path)) if path is not None else {}
    return config_from_dict(apply_overrides(data, overrides))


def read_mapping(p: Path) -> dict[str, Any]:
    """The YAML mapping in file ``p``; a missing file, bad YAML or another top level is a ConfigError."""
    kind, raw = read_at(p)  # one look (a file gone after an is_file raised a bare FileNotFoundError)
    if kind is not None:
        raise ConfigError(f"config file not found: {p}")
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=YamlLoader) or {}  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping of TrainConfig fields")
    return data


def config_from_dict(data: dict[str, Any], where: str = "", saved: bool = False) -> TrainConfig:
    """A mapping of TrainConfig fields (YAML-shaped, e.g. from `config_to_dict`) -> a validated TrainConfig."""
    return validate(_build(TrainConfig, data, where), saved)


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """The config as plain YAML / JSON values (tuples become lists); `config_from_dict` reads it back."""
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return plain(dataclasses.asdict(cfg))


PATH_FIELDS = ("dataset_file", "eval_dataset_file", "model_path", "ds_config")
"""The file settings `absolute_paths` resolves (and the ``image`` of each ``dataset`` / ``eval_dataset`` prompt)."""


def absolute_paths(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping (`config_to_dict`) with its relative file settings made absolute from the current
    directory, where a launch reads them: ``dataset_file``, ``eval_dataset_file`` and the ``image`` of each
    inline prompt always; ``model_path`` and ``ds_config`` when they name an existing file or folder (else a hub
    id, or a bundled DeepSpeed JSON, kept as given). A run's config.yaml stored them as given, so an export
    from another directory wrote a path that named nothing, and ``generate`` then found no prompt file."""
    def absolute(path: str) -> str:
        return str(Path(path).resolve())

    out = dict(data)
    for name in PATH_FIELDS:
        value = out.get(name)
        if isinstance(value, str) and value and (name.endswith("_file") or Path(value).exists()):
            out[name] = absolute(value)
    for name in ("dataset", "eval_dataset"):
        if isinstance(out.get(name), list):
            out[name] = [{**p, "image": absolute(p["image"])} if isinstance(p, dict) and isinstance(p.get("image"), str)
                         and p["image"] else p for p in out[name]]
    return out


def write_run_config(out_dir: Path, cfg: TrainConfig) -> Path:
    """Write a launch's config to ``out_dir/config.yaml`` (what ``python -m training.export --run`` rebuilds the
    model from, and a resume compares itself with), file settings made absolute (`absolute_paths`). Through a
    temporary file renamed over it: written in place, a full disk or a kill left the run's config empty or cut
    short, so the next resume compared itself with the defaults (refused: 'tiny: False -> True')."""
    from tools.jsonl import write_text_atomic

    path = Path(out_dir) / "config.yaml"
    write_text_atomic(path, yaml.safe_dump(absolute_paths(config_to_dict(cfg)), sort_keys=False))
    return path


def parse_cli(argv: Sequence[str]) -> TrainConfig:
    """``--config FILE`` plus field overrides -> a validated TrainConfig (see module docstring)."""
    args = list(argv)
    path: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        key, eq, val = args[i].partition("=")
        if key == "--config":
            if not eq:
                if i + 1 >= len(args) or _is_option(args[i + 1].partition("=")[0], _FIELD_NAMES):
                    raise ConfigError("--config needs a file path")
                val, i = args[i + 1], i + 1
            path = val
        else:
            rest.append(args[i])
        i += 1
    return load_config(path, rest)


def saved_config_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """A saved config mapping with the fields it predates filled by ``FIELD_DEFAULTS_BEFORE``, and a blank
    ``dataset_file`` / ``eval_dataset_file`` as None: validation now refuses one, but an earlier run could save
    ``eval_dataset_file: ''`` with ``eval_every: 0`` (never read; a blank ``dataset_file`` failed to load, so no
    run trained with one), and its config must still read for an export or a resume."""
    blank = {name: None for name in ("dataset_file", "eval_dataset_file")
             if isinstance(data.get(name), str) and is_blank_file(data[name])}
    return {**FIELD_DEFAULTS_BEFORE, **data, **blank}


def saved_config(data: Mapping[str, Any], where: str) -> TrainConfig:
    """A saved config mapping (a run's config.yaml, an export's) -> its TrainConfig as trained: `saved_config_dict`,
    validated as saved (`validate`: a value a launch now refuses, e.g. clip_range 2, is read as the run had it)."""
    return config_from_dict(saved_config_dict(data), where, saved=True)


def read_saved_fields(path: str | Path) -> dict[str, Any]:
    """A run's saved ``config.yaml`` as its fields (`saved_config_dict`), not validated; ConfigError as `read_mapping`."""
    return saved_config_dict(read_mapping(Path(path)))


def read_run_config(path: str | Path) -> TrainConfig:
    """A run's saved ``config.yaml`` (written by the trainer) -> a validated TrainConfig, read as trained."""
    return saved_config(read_mapping(Path(path)), str(path))
