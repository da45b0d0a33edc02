"""A benchmark file's rows as dicts, whatever it is stored as: TSV, CSV, JSON lines or Parquet.

Every `toolscale import qa` format reads through here, so a FRAMES TSV, a HLE Parquet file and a
user's JSONL file are checked the same way: a size bound, the columns the format needs (one line
naming the file and the column), and a line number for each row, for the messages.
"""

from __future__ import annotations

import csv
import io
import json
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from toolscale.bounded_parquet import bounded_rows
from toolscale.errors import ToolscaleError
from toolscale.untrusted import open_regular

MAX_BYTES = 512 * 2**20  # the largest public QA benchmarks are a few hundred MiB; more is a mistake
MAX_COLUMNS = 10_000
MAX_ROW_BYTES = 32 * 2**20  # one question's text and image (HLE's are data URIs of a few MB)
# a line of a text file: a question and its answer (a row with an image is skipped anyway); longer
# ones are skipped unread (within DuckDB's 128 MB during an import, a row of 30 MB does not fit)
MAX_LINE_CHARS = 8 * 2**20
SUFFIXES = (".tsv", ".csv", ".jsonl", ".json", ".parquet")
Row = dict[str, Any] | str | None  # None: a line that is not a JSON object; a str: another skip's reason


class SkipRowError(Exception):
    """A row left out of the import, for `reason`: counted in the result, never dropped silently."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass
class Table:
    path: Path
    columns: list[str]  # for JSON lines, the keys of any line
    rows: Iterator[tuple[int, Row]]  # (line or row number, row)

    def require(self, names: Sequence[str], hint: str = "") -> None:
        """One line naming the file and the first column it lacks."""
        for name in names:
            if name not in self.columns:
                # a few, each cut: a "header" may be any file's first line (a key in it included)
                shown = [c if len(c) <= 40 else c[:37] + "..." for c in self.columns if c][:12]
                more = f", and {len(self.columns) - 12} more" if len(self.columns) > 12 else ""
                found = ", ".join(shown) + more or "none"
                raise ToolscaleError(f"{self.path}: no column `{name}` (its columns: {found}){hint}")


def open_table(path: Path, wanted: Callable[[str], bool] = lambda _: True) -> Table:
    """The file's rows; Parquet reads only the `wanted` columns (HLE's image blobs stay on disk)."""
    # a stranger's folder may hold `frames.csv -> /proc/self/environ`: checked without following
    # links, and opened so (`untrusted.open_regular`), never read through one
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ToolscaleError(f"{path}: no such file") from None
    if stat.S_ISLNK(info.st_mode):
        raise ToolscaleError(f"{path}: is a symbolic link; copy the file it points to instead")
    if not stat.S_ISREG(info.st_mode):
        raise ToolscaleError(f"{path}: not a regular file")
    if (size := info.st_size) > MAX_BYTES:
        raise ToolscaleError(f"{path}: {size:,} bytes, over the {MAX_BYTES:,}-byte bound; split it into smaller files")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ToolscaleError(f"{path}: unknown file type `{suffix}`; use one of {', '.join(SUFFIXES)}")
    if suffix == ".parquet":
        return _parquet(path, wanted)
    if suffix in (".jsonl", ".json"):
        return _json_lines(path)
    return _delimited(path, "\t" if suffix == ".tsv" else ",")


def _parquet(path: Path, wanted: Callable[[str], bool]) -> Table:
    try:
        handle = open_regular(path)
        columns = list(pq.read_schema(handle).names)
    except ToolscaleError:
        raise
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise ToolscaleError(f"{path}: cannot read it as Parquet ({exc})") from None
    chosen = [c for c in columns if wanted(c)]

    def rows() -> Iterator[tuple[int, Row]]:
        yield from enumerate(bounded_rows(handle, str(path), MAX_ROW_BYTES, chosen), start=1)

    return Table(path, columns, rows())


def _json_lines(path: Path) -> Table:
    """A user's rows need not all have every key: the columns are every key of any line (a first
    pass), so a column no line has is refused before a row is read."""
    columns: dict[str, None] = {}
    for line in _text_lines(path):
        if line is TOO_LONG:
            continue
        if not columns and line.lstrip().startswith("["):
            raise ToolscaleError(f"{path}: a JSON array; write one JSON object per line (JSON lines)")
        columns |= dict.fromkeys(_json_object(line) or {})
        if len(columns) > MAX_COLUMNS:  # every row with keys of its own: not a table of questions
            raise ToolscaleError(f"{path}: more than {MAX_COLUMNS:,} different keys across its lines; a question "
                                 "file's lines share a few (question, answer, ...)")  # fmt: skip

    def rows() -> Iterator[tuple[int, Row]]:
        for number, line in enumerate(_text_lines(path), start=1):
            if line is TOO_LONG:
                yield number, "too_long"  # a counted skip, never read into memory whole
            elif line.strip():
                yield number, _json_object(line)

    return Table(path, list(columns), rows())


def _json_object(line: str) -> Row:
    """The line's object; None (a counted skip) for anything else: not JSON, nested past the
    parser's stack, or an integer of more digits than Python reads (issue 50 §10)."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _delimited(path: Path, delimiter: str) -> Table:
    # FRAMES prompts hold commas, quotes and newlines: the csv module reads pandas' quoting; a cell
    # may be as long as the file (the default bound, 128 KiB, refuses a HLE image in a CSV)
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_CHARS))
    reader = csv.reader(_csv_lines(path), delimiter=delimiter)
    header = _next_csv(reader, path) or []

    def rows() -> Iterator[tuple[int, Row]]:
        while (cells := _next_csv(reader, path)) is not None:
            if cells:  # a blank line is no row
                yield reader.line_num, dict(zip(header, cells, strict=False))

    return Table(path, header, rows())


def _next_csv(reader: Any, path: Path) -> list[str] | None:
    try:
        return next(reader, None)
    except csv.Error as exc:
        raise ToolscaleError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None


def _csv_lines(path: Path) -> Iterator[str]:
    """A delimited file's lines; one longer than a row may be is one error line (a cell may span
    lines, so a line cannot be skipped alone)."""
    for number, line in enumerate(_text_lines(path), start=1):
        if line is TOO_LONG:
            raise ToolscaleError(f"{path}:{number}: a line over {MAX_LINE_CHARS:,} characters: no row is that long")
        yield line


TOO_LONG = "\0too long\0"  # what `_text_lines` gives for a line past MAX_LINE_CHARS (compared by identity)


def _text_lines(path: Path) -> Iterator[str]:
    """The file's lines, decoded (a byte-order mark dropped); bad UTF-8 is one line naming the file.
    A line longer than a row may be is read in pieces and dropped: `TOO_LONG` in its place (a
    300 MB line would otherwise be one string in memory, and then in DuckDB)."""
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8-sig", newline="") as handle:
            while line := handle.readline(MAX_LINE_CHARS + 1):
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    while (rest := handle.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass
                    yield TOO_LONG
                    continue
                yield line
    except UnicodeDecodeError as exc:
        raise ToolscaleError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
