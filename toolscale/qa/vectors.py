"""A dense index on disk, at any size: embeddings are kept as they arrive in numbered chunks (a
build killed while embedding resumes from the last chunk written), then assembled into faiss
shards of at most `SHARD_BYTES` each. Flat shards are memory-mapped when opened (faiss's
`IO_FLAG_MMAP_IFC`): the pages are the OS's cache, not the process's memory, so an index larger
than memory still opens. Passage ids sit in two files (the ids' bytes and their offsets), read
through a memory map: no list of millions of strings is built to open an index.

Two kinds: `flat` (exact inner product: the reference, the same ranking everywhere) and `ivfpq`
(an inverted file of product-quantized codes, ~`m` bytes a vector instead of 4 x dim; approximate:
its recall@k against flat is measured in benchmarks/qa_vectors.py)."""

from __future__ import annotations

import json
import mmap
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

from toolscale.errors import ToolscaleError

IndexKind = Literal["flat", "ivfpq"]
INDEX_KINDS: tuple[IndexKind, ...] = ("flat", "ivfpq")
SHARD_BYTES = 512 * 2**20  # vectors a flat shard holds: 512 MiB of float32
CHUNK_PASSAGES = 4_096  # passages embedded, then written, at a time (a kill loses at most these)
IDS_FILE = "passage_ids.bin"
OFFSETS_FILE = "passage_offsets.i64"
JOB_FILE = "job.json"
IVF_TRAIN_PER_LIST = 40  # faiss warns below 39 training vectors a list
PQ_BITS = 8
DEFAULT_NPROBE = 32


def load_faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise ToolscaleError("dense retrieval needs faiss, an optional extra: pip install 'toolscale[dense]'") from None
    return faiss


def normalized(matrix: Any) -> Any:
    """Rows scaled to unit length (a zero row stays zero: it is near nothing)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1)


class Chunks:
    """Embedded chunks of a build in `folder`, for one job (content hash, model, passage words):
    a folder left by another job is emptied first."""

    def __init__(self, folder: Path, job: dict[str, Any]) -> None:
        self.folder = folder
        found = folder / JOB_FILE
        if found.is_file() and json.loads(found.read_text()) != job:
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        found.write_text(json.dumps(job, sort_keys=True))

    def path(self, number: int) -> Path:
        return self.folder / f"chunk-{number:06d}.npy"

    def load(self, number: int, rows: int) -> Any | None:
        """Chunk `number` when it was written whole with `rows` rows, else None."""
        path = self.path(number)
        if not path.is_file():
            return None
        try:
            matrix = np.load(path, mmap_mode="r")
        except (OSError, ValueError):
            return None
        return matrix if matrix.ndim == 2 and matrix.shape[0] == rows else None

    def save(self, number: int, matrix: Any) -> None:
        part = self.folder / f".chunk-{number:06d}.npy"
        np.save(part, np.ascontiguousarray(matrix, dtype=np.float32))
        part.rename(self.path(number))  # whole, or not there

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class IdsWriter:
    """Passage ids appended to the two id files of `folder`."""

    def __init__(self, folder: Path) -> None:
        self.ids = (folder / IDS_FILE).open("wb")
        self.offsets = (folder / OFFSETS_FILE).open("wb")
        self.end = 0
        self.offsets.write(np.int64(0).tobytes())

    def add(self, passage_ids: list[str]) -> None:
        encoded = [pid.encode() for pid in passage_ids]
        self.ids.write(b"".join(encoded))
        ends = self.end + np.cumsum([len(e) for e in encoded], dtype=np.int64)
        self.offsets.write(ends.tobytes())
        self.end = int(ends[-1]) if len(ends) else self.end

    def close(self) -> None:
        self.ids.close()
        self.offsets.close()


class PassageIds:
    """The ids of an index's rows, read through memory maps."""

    def __init__(self, folder: Path) -> None:
        self.offsets = np.memmap(folder / OFFSETS_FILE, dtype=np.int64, mode="r")
        self.handle = (folder / IDS_FILE).open("rb")
        size = (folder / IDS_FILE).stat().st_size
        self.blob: Any = mmap.mmap(self.handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> str:
        return bytes(self.blob[int(self.offsets[row]) : int(self.offsets[row + 1])]).decode()


def shard_rows(dim: int) -> int:
    return max(1, SHARD_BYTES // (4 * dim))


def write_shards(folder: Path, chunks: Iterator[Any], dim: int, total: int, kind: IndexKind) -> dict[str, Any]:
    """The index of `total` vectors (arriving in `chunks`) into `folder`; returns what the stamp records."""
    faiss = load_faiss()
    if kind == "ivfpq":
        return _write_ivfpq(faiss, folder, chunks, dim, total)
    shards, index, rows = [], faiss.IndexFlatIP(dim), shard_rows(dim)
    for matrix in chunks:
        start = 0
        while start < len(matrix):
            room = rows - index.ntotal
            index.add(np.ascontiguousarray(matrix[start : start + room]))
            start += room
            if index.ntotal == rows:
                shards.append(_write_shard(faiss, folder, len(shards), index))
                index = faiss.IndexFlatIP(dim)
    if index.ntotal or not shards:
        shards.append(_write_shard(faiss, folder, len(shards), index))
    return {"kind": "flat", "shards": shards}


def _write_shard(faiss: Any, folder: Path, number: int, index: Any) -> str:
    name = f"index-{number:04d}.faiss"
    faiss.write_index(index, str(folder / name))
    return name


def ivfpq_shape(dim: int, total: int) -> tuple[int, int]:
    """(lists, sub-quantizers): ~4 sqrt(n) lists, trainable from the vectors there are, and the
    largest `m` of at most dim/4 that divides dim (codes of `m` bytes)."""
    lists = max(1, min(int(4 * total**0.5), total // IVF_TRAIN_PER_LIST))
    m = next(m for m in range(max(1, dim // 4), 0, -1) if dim % m == 0)
    return lists, m


def _write_ivfpq(faiss: Any, folder: Path, chunks: Iterator[Any], dim: int, total: int) -> dict[str, Any]:
    lists, m = ivfpq_shape(dim, total)
    if total < 256:  # 8-bit PQ needs 256 training vectors a sub-quantizer
        raise ToolscaleError(f"an ivfpq index needs at least 256 passages; this corpus has {total}: use flat")
    index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, lists, m, PQ_BITS, faiss.METRIC_INNER_PRODUCT)
    held: list[Any] = []
    want = min(total, max(lists * IVF_TRAIN_PER_LIST, 256 * 40))  # the first vectors train it: seeded, so repeatable
    trained = False
    for matrix in chunks:
        if not trained:
            held.append(np.array(matrix))
            if sum(len(h) for h in held) < want:
                continue
            _train(faiss, index, np.concatenate(held)[:want])
            trained = True
            for h in held:
                index.add(h)
            held = []
            continue
        index.add(np.ascontiguousarray(matrix))
    name = _write_shard(faiss, folder, 0, index)
    return {"kind": "ivfpq", "shards": [name], "lists": lists, "m": m, "nprobe": min(DEFAULT_NPROBE, lists)}


def _train(faiss: Any, index: Any, sample: Any) -> None:
    """k-means on one thread with a fixed seed: the same centroids on every machine. A small corpus
    trains on fewer points than faiss advises (it would say so once per sub-quantizer)."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    for params in (index.cp, index.pq.cp):
        params.seed, params.min_points_per_centroid = 1234, 1
    try:
        index.train(sample)
    finally:
        faiss.omp_set_num_threads(threads)


class Shards:
    """The opened shards of an index: search each, merge by score (ties: the earlier row)."""

    def __init__(self, folder: Path, stamp: dict[str, Any]) -> None:
        faiss = load_faiss()
        flags = faiss.IO_FLAG_MMAP_IFC if stamp.get("kind", "flat") == "flat" else 0
        self.indexes = [faiss.read_index(str(folder / name), flags) for name in stamp["shards"]]
        for index in self.indexes:
            if stamp.get("kind") == "ivfpq":
                index.nprobe = int(stamp.get("nprobe", DEFAULT_NPROBE))
        self.d = self.indexes[0].d
        self.ntotal = sum(index.ntotal for index in self.indexes)

    def search(self, vector: Any, k: int) -> list[tuple[int, float]]:
        """The `k` best (row, score) pairs over every shard."""
        found: list[tuple[float, int]] = []
        base = 0
        for index in self.indexes:
            if index.ntotal:
                scores, rows = index.search(vector[None, :], min(k, index.ntotal))
                found += [(float(s), base + int(r)) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0]
            base += index.ntotal
        found.sort(key=lambda pair: (-pair[0], pair[1]))
        return [(row, score) for score, row in found[:k]]
