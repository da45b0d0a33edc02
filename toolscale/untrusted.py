"""Reading files someone else made (a τ² folder, a published dataset, a checkpoint, documents):
only regular files, never through a symbolic link, inside the folder they belong to, under a size
bound — refused with one line naming the path otherwise. A link to a token or to
/proc/self/environ would otherwise be read as data and sent on (to a model, to a report); a FIFO
would hang the command."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from toolscale.errors import ToolscaleError

MiB = 2**20


def check_regular(path: Path, max_bytes: int, inside: Path | None = None) -> os.stat_result:
    """`path`'s status when it is a regular file (not a link, FIFO, device or folder), within
    `max_bytes`, and (with `inside`) reached from that folder without leaving it."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ToolscaleError(f"{path} is missing") from None
    except OSError as exc:
        raise ToolscaleError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        raise ToolscaleError(f"{path}: is a symbolic link; copy the file it points to into the folder instead")
    if not stat.S_ISREG(info.st_mode):
        raise ToolscaleError(f"{path}: not a regular file")
    if inside is not None and not path.resolve().is_relative_to(inside.resolve()):
        raise ToolscaleError(f"{path}: lies outside {inside} (a linked folder on the way?)")
    if info.st_size > max_bytes:
        raise ToolscaleError(f"{path}: {info.st_size:,} bytes, over the {max_bytes // MiB} MiB this file may have")
    return info


def open_regular(path: Path) -> BinaryIO:
    """`path` opened for reading without following a link and without blocking, and checked on the
    open file: a file swapped for a link, a FIFO or a device after it was checked is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot open it ({exc.strerror or exc})"
        raise ToolscaleError(f"{path}: {why}") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise ToolscaleError(f"{path}: not a regular file")
    os.set_blocking(handle.fileno(), True)  # a regular file: reads never wait anyway
    return handle


def read_bytes(path: Path, max_bytes: int, inside: Path | None = None) -> bytes:
    """The file's bytes, after `check_regular`, read through `open_regular` (a file swapped for a
    FIFO or a link in between is refused, not waited on)."""
    check_regular(path, max_bytes, inside)
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolscaleError(f"{path}: over the {max_bytes // MiB} MiB this file may have")
    return data


def read_text(path: Path, max_bytes: int, inside: Path | None = None) -> str:
    try:
        return read_bytes(path, max_bytes, inside).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolscaleError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def check_folder(folder: Path) -> None:
    """Every file directly in `folder` is a regular file: no link (out of it or anywhere), no FIFO
    (a FIFO named model.safetensors hangs whatever reads it), no device. Sub-folders (a trainer's
    `checkpoint-N`) are left to whoever reads them."""
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise ToolscaleError(f"{folder}: cannot list it ({exc.strerror or exc})") from None
    for entry in entries:
        mode = entry.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise ToolscaleError(f"{entry}: is a symbolic link; a checkpoint folder must hold its files (copy them in)")
        if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
            raise ToolscaleError(f"{entry}: not a regular file")


def check_tree(root: Path, max_entries: int = 100_000) -> None:
    """Every entry under `root` (a published dataset) is a folder or a regular file: a link out of
    it or a FIFO among its shards is refused before anything is read."""
    seen = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            seen += 1
            if seen > max_entries:
                raise ToolscaleError(f"{root}: more than {max_entries:,} files; not a dataset folder")
            mode = entry.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise ToolscaleError(f"{entry}: is a symbolic link; a dataset folder must hold its files")
            if stat.S_ISDIR(mode):
                stack.append(entry)
            elif not stat.S_ISREG(mode):
                raise ToolscaleError(f"{entry}: not a regular file")
