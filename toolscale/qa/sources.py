"""Documents from what a user brings: a folder of text, markdown, JSONL and Parquet files (the
Hub's Wikipedia is a folder of Parquet shards), or one Parquet or JSONL file. A folder someone else
made is read with care: regular files inside it only (a link, a FIFO or a device is refused,
naming the path), each under a size bound."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolscale.bounded_parquet import bounded_rows
from toolscale.errors import ToolscaleError
from toolscale.qa.corpus import Document
from toolscale.untrusted import check_regular

MAX_FILE_BYTES = 512 * 2**20
MAX_DOCUMENT_CHARS = 2_000_000  # a longer "document" is a dump, not a page: refused, not truncated
MAX_ROW_BYTES = 4 * MAX_DOCUMENT_CHARS + 2**20  # a document's text in UTF-8, and its title and URL
TEXT_SUFFIXES = (".txt", ".md", ".markdown")
ID_FIELDS = ("id", "doc_id", "_id", "docid")
TEXT_FIELDS = ("text", "contents", "content", "body")


def read_documents(source: Path) -> Iterator[Document]:
    """Every document of `source` (a folder, `.parquet`, or `.jsonl`), in a stable order."""
    info = _lstat(source)
    if stat.S_ISDIR(info.st_mode):
        yield from _folder(source)
    elif source.suffix == ".parquet":
        yield from _parquet(_regular(source))
    elif source.suffix in (".jsonl", ".json"):
        yield from _jsonl(_regular(source), prefix="")
    else:
        raise ToolscaleError(f"{source}: expected a folder, a .parquet or a .jsonl file of documents")


def source_fingerprint(source: Path) -> str:
    """The state of what `read_documents(source)` reads: each file's path, size and modification
    time. A build of an unchanged source resumes a killed one; any change starts it afresh."""
    info = _lstat(source)
    files = _walk(source) if stat.S_ISDIR(info.st_mode) else iter([source])
    states = []
    for path in files:
        found = _lstat(path)
        states.append([path.relative_to(source).as_posix() if path != source else "", found.st_size,
                       found.st_mtime_ns])  # fmt: skip
    return hashlib.blake2b(json.dumps(states).encode(), digest_size=16).hexdigest()


def expected_documents(source: Path) -> int | None:
    """How many documents `source` holds, where that is known without reading them (Parquet
    footers, one per text file); None where a JSONL file would have to be read through."""
    info = _lstat(source)
    files = list(_walk(source)) if stat.S_ISDIR(info.st_mode) else [source]
    total = 0
    for path in files:
        if path.suffix in TEXT_SUFFIXES:
            total += 1
        elif path.suffix == ".parquet":
            total += _parquet_rows(path)
        else:
            return None
    return total


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise ToolscaleError(f"{path}: not a readable Parquet file ({type(exc).__name__})") from None


def _lstat(path: Path) -> os.stat_result:
    try:
        return path.lstat()
    except OSError as exc:
        raise ToolscaleError(f"{path}: cannot read ({exc.strerror})") from None


def _regular(path: Path) -> Path:
    """`path` itself, when it is a regular file (not a link, FIFO or device) within the size bound."""
    check_regular(path, MAX_FILE_BYTES)
    return path


def _folder(root: Path) -> Iterator[Document]:
    for path in _walk(root):
        relative = path.relative_to(root).as_posix()
        if path.suffix in TEXT_SUFFIXES:
            yield _text_document(path, relative.rsplit(".", 1)[0])
        elif path.suffix == ".jsonl":
            yield from _jsonl(path, prefix=relative.rsplit(".", 1)[0] + "/")
        elif path.suffix == ".parquet":  # the Hub's layout: shards of one table (`id, url, title, text`)
            yield from _parquet(path, default_prefix=relative.rsplit(".", 1)[0] + "/")


def _walk(root: Path) -> Iterator[Path]:
    """Regular files under `root` in name order (depth first), never leaving it: a link anywhere is
    refused. A stack, not recursion: a folder nested thousands deep is walked, not a RecursionError."""
    stack = [iter(sorted(root.iterdir(), key=lambda p: p.name))]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        mode = _lstat(entry).st_mode
        if stat.S_ISDIR(mode):
            stack.append(iter(sorted(entry.iterdir(), key=lambda p: p.name)))
        elif entry.suffix in (*TEXT_SUFFIXES, ".jsonl", ".parquet"):
            yield _regular(entry)
        elif stat.S_ISLNK(mode):
            raise ToolscaleError(f"{entry}: is a symbolic link; copy the file it points to instead")


def _text_document(path: Path, doc_id: str) -> Document:
    text = path.read_text(encoding="utf-8", errors="replace")
    _bounded(text, path)
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    title = first.lstrip("#").strip() if first.startswith("#") else path.stem.replace("_", " ")
    return Document(doc_id, title, text)


def _jsonl(path: Path, prefix: str) -> Iterator[Document]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except RecursionError:
                    raise ToolscaleError(f"{path}:{number}: nested too deeply to be a document") from None
                except ValueError as exc:  # not JSON, or an integer of more digits than Python reads
                    raise ToolscaleError(f"{path}:{number}: not JSON ({str(exc)[:100]})") from None
                yield _record_document(record, f"{path}:{number}", prefix, default_id=str(number))


def _parquet(path: Path, default_prefix: str = "") -> Iterator[Document]:
    """The file's rows in batches, in bounded memory whatever they decode to (a shard of Wikipedia
    is never held whole); a row's own id is kept as it is (page ids are unique across the shards),
    a row without one is `<shard>/<row>`."""
    rows = bounded_rows(path, str(path), MAX_ROW_BYTES)
    for number, record in enumerate(rows, 1):
        yield _record_document(record, f"{path} row {number}", "", default_id=f"{default_prefix}{number}")


def _record_document(record: Any, where: str, prefix: str, default_id: str) -> Document:
    if not isinstance(record, dict):
        raise ToolscaleError(f"{where}: a document must be an object with a text field")
    text = next((record[f] for f in TEXT_FIELDS if isinstance(record.get(f), str)), None)
    if text is None:
        raise ToolscaleError(f"{where}: no text field (one of {', '.join(TEXT_FIELDS)})")
    _bounded(text, where)
    doc_id = next((str(record[f]) for f in ID_FIELDS if record.get(f) not in (None, "")), default_id)
    title = record.get("title")
    url = record.get("url")
    return Document(prefix + doc_id, title if isinstance(title, str) else "", text, url if isinstance(url, str) else "")


def _bounded(text: str, where: object) -> None:
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ToolscaleError(f"{where}: a document of {len(text)} characters, over the {MAX_DOCUMENT_CHARS} bound")
