"""Reading JSONL files. Strictly (`json_lines`): every non-blank line must be JSON, and a line that is not
names its place (`PATH:N`). Shared by the readers that refuse a broken file rather than skip its lines
(`training.data.load_prompts`, the clip-suite manifest's `evals.manifest_rows.load_manifest` and
`evals.clipsuite`'s merge of a partial render). Leniently (`json_objects`), for a log another process may be
appending to: lines that are not JSON objects are skipped and counted (`training.best`, `training.launches`,
`training.report` through `training.run_files`).
Row by row (`usable_rows`), for the evaluation readers (`evals.compare`, `evals.draws`, `evals.vqa`,
`evals.result_rows.results_rows`): a line that is not UTF-8, not JSON, or that the reader's own check refuses
(`LineError`) is skipped and reported as a `SkippedLine` (`PATH:N` and the reason), and the other rows are
read: one damaged line no longer cost the whole file. Refusals about several rows together (the same clip
twice with other data) are the reader's, raised after this pass, never a skipped line.

Lines are split at "\n" only (`text_lines`): `str.splitlines` also splits at U+2028, U+2029, U+0085 and
other separators that JSON allows raw inside strings (`json.dumps(..., ensure_ascii=False)` writes them),
which cut a valid row in two. Files rows are appended to are first mended at their end (`mend_tail`), and
rewritten without some rows in one rename (`keep_rows`: `training.metrics_log.trim_log`; `graph.batch_resume.drop_rows`
does the same from the lines it read already).

Writing (`strict_dumps`): JSON for other programs to read (`raa score-batch` rows, `raa trace --json`,
`raa runs --json`) writes a NaN or infinite number as null: `json.dumps` writes `NaN` / `Infinity`, which
are not JSON, and strict readers (JavaScript, jq, Go, Rust's serde) refuse the whole line.

A UTF-8 byte-order mark at the start of a file (Windows editors, PowerShell) is skipped by every reader here
and by the repo's other JSONL readers (`read_text` / `decode_text`, "utf-8-sig"): read as part of the first line,
that line was no JSON and its row was lost (a `raa score-batch` resume scored the first clip again, and
`keep_rows` / `mend_tail` deleted it). A file rewritten (`keep_rows`) loses its mark.

A JSON integer longer than Python converts (`sys.get_int_max_str_digits`, 4300 digits) makes `json.loads` raise a
plain ValueError, not JSONDecodeError: `parsed_line` turns it into one placed at the number (its line and column),
so the readers here name such a line as not valid JSON (it let a traceback out of `usable_rows` and `json_lines`).
Readers of a whole JSON file a user may edit parse it with `parsed_line` too (the score-batch manifest's lines,
generate.json, export.json, an eval folder's summary.json and started.json), so their answer to invalid JSON covers
such a number. `parsed_file` reads and parses such a file, and names one that is not UTF-8 with JSONDecodeError too
(generate.json and export.json let a UnicodeDecodeError out as a traceback).

Every reader here reads through `read_bytes` (`tools.file_kinds`, imported here for the readers that read bytes),
which refuses a file that is not a regular one with an OSError naming its kind ("not a regular file: a FIFO"): a FIFO
named summary.json or metrics.jsonl blocked its reader forever."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tools.file_kinds import read_at, read_bytes

T = TypeVar("T")


def decode_text(data: bytes, errors: str = "strict") -> str:
    """The text of a JSONL file's bytes: UTF-8, a leading byte-order mark skipped (module docstring);
    UnicodeDecodeError (with `errors="strict"`) where it is not UTF-8."""
    return data.decode("utf-8-sig", errors)


def read_text(path: Path, errors: str = "strict") -> str:
    """`decode_text` of the file at `path` (`read_bytes`: a regular file only)."""
    return decode_text(read_bytes(path), errors)


def text_lines(text: str) -> list[str]:
    """The lines of a JSONL text: split at "\n" only, a trailing "\r" dropped, no empty line after a final
    newline (see the module docstring)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def keep_rows(path: Path, keep: Callable[[Any], bool]) -> int:
    """Rewrite `path` with only its lines whose JSON value passes `keep` (a line that is not JSON goes too: a
    write torn by a crash), atomically: a temporary file beside it is renamed over it, so an interruption
    leaves the old file or the new one. The file is left alone when no line goes (or it does not exist).
    Returns the number of lines dropped. Read from one look (`read_at`: a file removed after an ``is_file`` and
    before its read by name raised FileNotFoundError)."""
    kind, data = read_at(path)
    if kind is not None:  # not there, or no regular file (a FIFO is not opened)
        return 0
    lines = text_lines(decode_text(data))
    kept = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if keep(row):
            kept.append(line)
    if len(kept) == len(lines):
        return 0
    write_text_atomic(path, "".join(line + "\n" for line in kept))
    return len(lines) - len(kept)


def written_file(path: Path) -> Path:
    """The file a write to `path` lands in: symlinks followed (of `path` and of its folders), so two names of one
    file are one file (`write_text_atomic` replaces it; `graph.batch_output.lock_output` locks beside it)."""
    return Path(os.path.realpath(path))


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` through a temporary file beside it renamed over it: an interruption (a
    kill, a full disk) leaves the old file or the new one, never an empty or cut one. A symlink is followed: the
    file it points at is replaced and the link stays (renamed over, the link itself became a plain file, and the
    file it pointed at, which appends through the link had written, was left behind)."""
    target = written_file(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def mend_tail(path: Path) -> None:
    """Make `path` end at a line boundary before rows are appended to it. A last line without its newline
    (a write torn by a crash or a full disk) is cut off when it is not JSON, so the file stays readable by
    strict readers (its item has no row and is scored again), and closed with a newline when it is. A file removed
    after the look (`Path.is_file`, which keeps a FIFO from being opened) is not there: nothing to mend (its open
    raised FileNotFoundError); so is one that is no regular file by then (the open file's fstat)."""
    if not path.is_file():
        return
    try:
        fh = path.open("rb+")
    except FileNotFoundError:
        return
    with fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return
        end = fh.seek(0, 2)
        if end == 0:
            return
        fh.seek(end - 1)
        if fh.read(1) == b"\n":
            return
        cut = 0
        while end > 0:  # the last newline, read backwards in blocks
            start = max(0, end - 65536)
            fh.seek(start)
            k = fh.read(end - start).rfind(b"\n")
            if k >= 0:
                cut = start + k + 1
                break
            end = start
        fh.seek(cut)
        try:
            json.loads(fh.read().decode("utf-8-sig" if cut == 0 else "utf-8"))  # a first line: its mark skipped
        except ValueError:
            fh.truncate(cut)
            return
        fh.seek(0, 2)
        fh.write(b"\n")


def parsed_line(line: str) -> Any:
    """``json.loads(line)`` of a line or a whole file's text; a number too long for Python's int conversion
    (module docstring) raises JSONDecodeError saying so, as text that is no JSON does."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise
    except ValueError:
        raise json.JSONDecodeError(f"a number of more than {sys.get_int_max_str_digits()} digits", line,
                                   _long_integer_at(line)) from None


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_NOT_ZERO = re.compile(b"[^0]")


def _long_integer_at(text: str) -> int:
    """Where the first integer of more digits than Python converts starts in `text` (0 when none is found). Only a
    valid JSON prefix comes before it (`json.loads` stops at the first fault): a run of more digits than that, with
    no fraction or exponent around it, is that integer unless it stands inside a string, which the number of string
    quotes before it tells (outside strings valid JSON has no backslash; inside, a quote is escaped). The runs are
    found by a substring search of the UTF-8 bytes with every digit made 0 (ASCII bytes never occur inside a
    multi-byte character), and quotes counted between them: linear, in C. A token-by-token regex scan took seconds
    on a text of tens of MB, and a regex search for the runs about one (`benchmarks/long_integer_scan.py`). The
    escaped quotes are counted in C too: the quotes after a backslash, or, where one follows two (a rare escaped
    backslash before it), those left after each run of backslashes' pairs is deleted (`bytes.replace`, left to right,
    as escapes pair). A regex listing every escape pair built a list of half a million items for a megabyte of
    backslashes. The place was always char 0 ("column 1") before any scan."""
    data = text.encode("utf-8", "surrogatepass")
    digits = data.translate(_DIGITS_AS_ZERO)
    long_run = b"0" * (sys.get_int_max_str_digits() + 1)
    inside, done, at = False, 0, digits.find(long_run)  # `inside`: whether `done` is inside a string
    while at >= 0:  # `at`: a run's first digit (each find starts at a run's end, where no digit is)
        after = _NOT_ZERO.search(digits, at)
        end = after.start() if after else len(digits)
        start = at - (data[at - 1:at] == b"-")  # its minus sign: no escape sequence is cut there
        quotes = data.count(b'"', done, start)
        if data.find(b'\\\\"', done, start) >= 0:  # less the escaped quotes, `\\` pairs dropped from each run's start
            quotes -= data[done:start].replace(b"\\\\", b"").count(b'\\"')
        elif data.find(b"\\", done, start) >= 0:  # no quote after two backslashes: one after one is escaped
            quotes -= data.count(b'\\"', done, start)
        inside, done = inside != (quotes % 2 == 1), start
        if not inside and data[start - 1:start] not in (b".", b"e", b"E", b"+", b"-") \
                and data[end:end + 1] not in (b".", b"e", b"E"):  # no fraction's or exponent's digits
            return len(data[:start].decode("utf-8", "surrogatepass"))
        at = digits.find(long_run, end)
    return 0


def _fault_place(exc: UnicodeDecodeError) -> tuple[int, int]:
    """(line, column), both from 1, of the byte that is not UTF-8."""
    before = exc.object[:exc.start]
    return before.count(b"\n") + 1, exc.start - before.rfind(b"\n")


class NotUtf8Error(json.JSONDecodeError):
    """`json_text`'s JSONDecodeError for a file that is not UTF-8 text: its message names the place of the byte, and
    its text is no more than the message (JSONDecodeError's adds "line 1 column 1 (char 0)", a place in no text)."""

    def __init__(self, msg: str, doc: str = "", pos: int = 0) -> None:
        super().__init__(msg, doc, pos)
        self.args = (msg,)


def json_text(path: Path, *, data: bytes | None = None) -> str:
    """The text of a whole JSON file (`read_text`: UTF-8 whatever the system's default encoding, a byte-order mark
    skipped), for a reader that parses it itself (a weight index); JSONDecodeError for a file that is not UTF-8 text
    (saying where and to save it as UTF-8), so a reader's answer to invalid JSON covers it; OSError as reading
    raises it. `data`: the file's bytes, when the caller has read them already (`json_lines`' `data`)."""
    try:
        return read_text(path) if data is None else decode_text(data)
    except UnicodeDecodeError as exc:
        number, column = _fault_place(exc)
        raise NotUtf8Error(f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at line {number} column {column}): "
                           "save the file as UTF-8") from None


def parsed_file(path: Path, *, data: bytes | None = None) -> Any:
    """The JSON value of a whole file a user may edit or this repo wrote (`json_text`, then `parsed_line`).
    JSONDecodeError for invalid JSON and for a file that is not UTF-8 text, so a reader's answer to invalid JSON
    covers both; OSError as reading raises it. Every reader of a JSON file goes through here (or `json_text`):
    `Path.read_text()` decoded it in the system's default encoding (LANG=C without Python's UTF-8 mode, a Windows
    code page), and non-ASCII text this repo wrote as UTF-8 read as unreadable or as other text. `data`: as
    `json_text`'s."""
    return parsed_line(json_text(path, data=data))


def json_lines(path: Path, error: Callable[[str], Exception], *, data: bytes | None = None) -> Iterator[tuple[str, Any]]:
    """`("PATH:N", value)` for each non-blank line of `path`; `error("PATH:N: not valid JSON (...)")` is
    raised for a line that does not parse, and `error("PATH:N: not UTF-8 text (...)")` for a file that is not
    UTF-8 (a Latin-1 export: the bare UnicodeDecodeError named no file). `data`: the file's bytes, when the caller
    has read them already (`usable_rows`' `data`)."""
    try:
        text = read_text(path) if data is None else decode_text(data)
    except UnicodeDecodeError as exc:
        number, column = _fault_place(exc)
        raise error(f"{path}:{number}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at column {column}): "
                    "save the file as UTF-8") from None
    for number, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = parsed_line(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        yield where, value


@dataclass(frozen=True)
class SkippedLine:
    """A line a lenient reader left out (`usable_rows`)."""

    line: str
    """Where: ``PATH:N`` (N counts from 1)."""
    reason: str
    """Why it was left out."""

    def __str__(self) -> str:
        return f"{self.line}: {self.reason}"

    def as_dict(self) -> dict[str, str]:
        return {"line": self.line, "reason": self.reason}


class LineError(ValueError):
    """One line's value is not a usable row: `usable_rows` skips the line with this reason."""


def usable_rows(path: Path, parse: Callable[[str, Any], T], *,
                data: bytes | None = None) -> tuple[list[T], list[SkippedLine]]:
    """``parse(where, value)`` of each non-blank line of `path` that is UTF-8 JSON (``where`` is ``PATH:N``),
    and the lines left out (module docstring): not UTF-8 text, not valid JSON, or refused by `parse` with
    `LineError` (its message, a leading ``"PATH:N: "`` dropped). Any other exception of `parse` propagates.
    `data`: the file's bytes, when the caller has read them already (the file is then not read again)."""
    raw = (read_bytes(path) if data is None else data).split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()
    rows: list[T] = []
    skipped: list[SkippedLine] = []
    for number, data in enumerate(raw, start=1):
        where = f"{path}:{number}"
        try:
            line = data.decode("utf-8").removeprefix("\ufeff" if number == 1 else "")
        except UnicodeDecodeError as exc:
            skipped.append(SkippedLine(where, f"not UTF-8 text (byte {data[exc.start]:#04x} at column "
                                              f"{exc.start + 1}): save the file as UTF-8"))
            continue
        if not line.strip():
            continue
        try:
            rows.append(parse(where, parsed_line(line)))
        except json.JSONDecodeError as exc:
            skipped.append(SkippedLine(where, f"not valid JSON ({exc.msg})"))
        except LineError as exc:
            skipped.append(SkippedLine(where, str(exc).removeprefix(f"{where}: ")))
    return rows, skipped


SHOWN_SKIPS = 10
"""Skipped lines `no_usable_row` names one by one."""


def no_usable_row(path: Path, skipped: list[SkippedLine], error: Callable[[str], Exception]) -> Exception:
    """`error` for a file none of whose lines is a usable row, naming each skipped line with its reason (the
    first `SHOWN_SKIPS`, then how many more)."""
    return error(f"{path}: no usable row: its {len(skipped)} line(s) were all skipped:{skipped_listing(skipped)}")


def skipped_listing(skipped: list[SkippedLine]) -> str:
    """The skipped lines for an error message: the first `SHOWN_SKIPS` as "\n  PATH:N: REASON", then how many
    more."""
    shown = "".join(f"\n  {s}" for s in skipped[:SHOWN_SKIPS])
    return shown + (f"\n  ... and {len(skipped) - SHOWN_SKIPS} more" if len(skipped) > SHOWN_SKIPS else "")


def json_objects(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of `path`'s lines and how many non-blank lines were not one (a line being
    written, a torn file); ([], 0) without the file (or where no regular file is). Read from one look (`read_at`: a
    file removed after an ``is_file`` and before its read by name raised FileNotFoundError)."""
    kind, data = read_at(path)
    if kind is not None:
        return [], 0
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in text_lines(decode_text(data, errors="replace")):
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif line.strip():
            skipped += 1
    return rows, skipped


def finite_json(value: Any) -> Any:
    """`value` with each float that is NaN or infinite, in dicts, lists and tuples at any depth, replaced by
    None (JSON null); other values as they are (tuples become lists, as JSON writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def strict_dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps(value, **kwargs)` that is always valid JSON: non-finite numbers become null (`finite_json`;
    see the module docstring)."""
    return json.dumps(finite_json(value), allow_nan=False, **kwargs)
