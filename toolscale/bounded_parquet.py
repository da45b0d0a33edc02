"""Parquet rows from a stranger's file in bounded memory. A Parquet file's size says little about
what it decodes to: one long value in a column's dictionary, repeated on every row, makes a 792-byte
file decode to gigabytes, and zstd shrinks a run of one character a thousandfold. So the column
chunks' uncompressed sizes are checked from the footer before anything is read; text columns are
read as dictionaries, so a repeated value is measured before it is copied into every row; and rows
are built a batch at a time, each row's text measured first."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from toolscale.errors import ToolscaleError


class UnreadableParquetError(ToolscaleError):
    """The file is not Parquet pyarrow can read (as opposed to one refused for what it holds)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: not a readable Parquet file ({reason})")
        self.reason = reason


BATCH_ROWS = 64  # a column read plainly decodes this many rows at once before they are measured
MAX_CHUNK_BYTES = 2 * 2**30  # one column chunk decompressed (a Wikipedia shard's row group of text: ~100 MB)
REPEATED_ROW_BYTES = 1_024
MAX_BATCH_BYTES = 64 * 2**20  # rows built at once: past it, one at a time
MAX_RATIO = 1_000  # text a file may decode to, per byte on disk (Wikipedia's shards: ~2); and a floor:
RATIO_FLOOR = 64 * 2**20  # a small file may always decode to this much


def bounded_rows(
    source: Any, where: str, max_row_bytes: int, columns: Sequence[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Each row of the Parquet file `source` (a path or an open file) as a dict; a row whose text
    passes `max_row_bytes` is refused naming its number, before it is built."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(source)
        text = [f.name for f in schema if _is_text(pa, f.type)]
        wanted = list(columns) if columns is not None else schema.names
        meta = pq.ParquetFile(source).metadata
        _check_chunks(meta, where)
        parquet = pq.ParquetFile(source, read_dictionary=[c for c in text if c in wanted and _repetitive(meta, c)])
        allowed = MAX_RATIO * _file_bytes(source) + RATIO_FLOOR
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, columns=wanted)
        number, decoded = 0, 0
        for batch in batches:
            sizes = _row_bytes(batch, [c for c in text if c in wanted], pc)
            decoded += sum(sizes)
            if decoded > allowed:  # a decompression bomb: refused before it fills memory or the store
                raise ToolscaleError(f"{where}: decodes to over {decoded:,} bytes of text, more than {MAX_RATIO:,} "
                                     "times its size; not a dataset written the usual way")  # fmt: skip
            worst = max(sizes, default=0)
            if worst > max_row_bytes:
                row = number + sizes.index(worst) + 1
                raise ToolscaleError(
                    f"{where} row {row}: {worst:,} bytes of text, over the {max_row_bytes:,} a row may have"
                )
            if sum(sizes) <= MAX_BATCH_BYTES:
                yield from batch.to_pylist()
            else:
                for i in range(batch.num_rows):
                    yield from batch.slice(i, 1).to_pylist()
            number += batch.num_rows
    except ToolscaleError:
        raise
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise UnreadableParquetError(where, type(exc).__name__) from None


def _is_text(pa: Any, kind: Any) -> bool:
    """A string or binary column, dictionary-encoded (as a bomb's schema says it is) or not."""
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    checks = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    return any(check(kind) for check in checks)


def _file_bytes(source: Any) -> int:
    import os

    return os.fstat(source.fileno()).st_size if hasattr(source, "fileno") else os.stat(source).st_size


def _repetitive(meta: Any, name: str) -> bool:
    """Whether a text column may decode to far more than it holds: dictionary-encoded, with under
    `REPEATED_ROW_BYTES` stored a row somewhere (a bomb's one long value repeated: ~200 bytes a
    row). Such a column is read as a dictionary, measured before rows are built; a column of
    distinct texts (Wikipedia's: ~4 KB a row) is read plainly: as a dictionary its reader would
    hash every text of a row group, ~3x the group's size in memory."""
    index = meta.schema.names.index(name)
    for group in range(meta.num_row_groups):
        chunk, rows = meta.row_group(group).column(index), meta.row_group(group).num_rows
        if chunk.has_dictionary_page and chunk.total_uncompressed_size < REPEATED_ROW_BYTES * max(1, rows):
            return True
    return False


def _check_chunks(meta: Any, where: str) -> None:
    for group in range(meta.num_row_groups):
        for column in range(meta.num_columns):
            chunk = meta.row_group(group).column(column)
            if chunk.total_uncompressed_size > MAX_CHUNK_BYTES:
                raise ToolscaleError(
                    f"{where}: column `{chunk.path_in_schema}` decompresses to {chunk.total_uncompressed_size:,} bytes "
                    f"in one row group, over {MAX_CHUNK_BYTES:,}; write it with smaller row groups"
                )


def _row_bytes(batch: Any, text: list[str], pc: Any) -> list[int]:
    """Each row's bytes of text: a dictionary column's lengths looked up, never its values copied."""
    sizes = [0] * batch.num_rows
    for name in text:
        column = batch.column(name)
        if hasattr(column, "dictionary"):
            lengths = pc.take(pc.binary_length(column.dictionary), column.indices)
        else:
            lengths = pc.binary_length(column)
        for i, length in enumerate(lengths.to_pylist()):
            sizes[i] += length or 0
    return sizes
