"""A sandbox for model-written Python: bubblewrap isolation plus resource limits.

What it guarantees when bubblewrap (`bwrap`) is available (the default, and required):
- **filesystem**: the code sees a fresh scratch directory (`/scratch`, its working directory and
  HOME, discarded afterwards), the Python installation and system libraries *read-only*, a
  private `/proc` and a minimal `/dev`. Nothing else of the host exists for it: no home
  directories, no project checkout, no `/etc`;
- **network**: none (a new network namespace with no interfaces up): not the internet, not
  services on the host's 127.0.0.1;
- **processes**: its own PID namespace (it cannot see or signal host processes) and at most
  `processes` processes (a pids cgroup when run as root, RLIMIT_NPROC otherwise; where neither
  is possible the cap is missing, which `process_limit_enforced()` reports); everything is killed
  when the run ends or the parent dies;
- **privileges**: its own user namespace with every capability dropped, and the sandbox's root
  directory read-only, so `chroot`, `mount`, raw sockets and writes outside `/scratch` all fail;
- **environment**: cleared; only PATH, HOME and TMPDIR are set;
- **limits**: CPU seconds, wall-clock seconds, address space, size of any file it writes
  (stdout and stderr included: runaway output is stopped, then cut to `output_bytes`).

Without bubblewrap it refuses to run code unless `allow_unisolated=True`, in which case only the
resource limits, a scratch working directory and a cleared environment apply: the code can read
what the current user can read and reach the network. Use that only for trusted code.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolscale.env.tools import ToolOutput
from toolscale.pricing import PriceTable, Usage, default_prices


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mb: int = 512
    output_bytes: int = 20_000  # what the agent sees, per stream
    file_mb: int = 8  # any file written, stdout and stderr included
    processes: int = 16


@dataclass(frozen=True)
class SandboxResult:
    stdout: str
    stderr: str
    exit_code: int | None
    seconds: float
    error: str | None = None  # why the run was stopped or refused, in words
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0


PRLIMIT = shutil.which("prlimit") or "prlimit"  # util-linux, on every Debian-like system


@functools.cache
def bubblewrap() -> str | None:
    """The path of a *working* bwrap (installed and allowed to create namespaces here), or None."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run(
        [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=10
    )
    return path if probe.returncode == 0 else None


def _interpreter() -> tuple[str, str]:
    """The real Python binary (not a venv shim) and the installation prefix it needs."""
    return os.path.realpath(sys.executable), sys.base_prefix


class Sandbox:
    def __init__(
        self, limits: SandboxLimits | None = None, allow_unisolated: bool = False, use_bubblewrap: bool = True
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.allow_unisolated = allow_unisolated
        self.use_bubblewrap = use_bubblewrap

    @property
    def isolation(self) -> str:
        return "bubblewrap" if self.use_bubblewrap and bubblewrap() else "none"

    def run(self, code: str) -> SandboxResult:
        if self.isolation == "none" and not self.allow_unisolated:
            return SandboxResult("", "", None, 0.0, "no isolation available: install bubblewrap (apt-get install "
                                 "bubblewrap) to run code; refusing to run it unisolated")  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="toolscale-sandbox-") as folder:
            work = Path(folder)
            scratch = work / "scratch"
            scratch.mkdir()
            (scratch / "main.py").write_text(code, encoding="utf-8")
            return self._execute(work, scratch)

    def _command(self, scratch: Path) -> list[str]:
        python, prefix = _interpreter()
        if self.isolation == "none":
            return [python, "-I", str(scratch / "main.py")]
        command = [
            bubblewrap() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/usr", "/usr", "--ro-bind", prefix, prefix,
            "--proc", "/proc", "--dev", "/dev",
            "--bind", str(scratch), "/scratch", "--chdir", "/scratch", "--cap-drop", "ALL",
            "--setenv", "HOME", "/scratch", "--setenv", "TMPDIR", "/scratch", "--setenv", "PATH", "/usr/bin:/bin",
        ]  # fmt: skip
        for system_dir in ("/bin", "/lib", "/lib64", "/sbin"):
            if os.path.exists(system_dir):
                link = os.path.islink(system_dir)
                command += ["--symlink", os.readlink(system_dir), system_dir] if link else [
                    "--ro-bind", system_dir, system_dir]  # fmt: skip
        # the root of the sandbox (a tmpfs holding the mount points) is made read-only last
        return [*command, "--remount-ro", "/", python, "-I", "/scratch/main.py"]

    def _limited(self, command: list[str], cgroup: Path | None) -> list[str]:
        """`command` wrapped so that, before it starts, the process joins the pids cgroup and takes
        its resource limits (inherited by everything the code starts). A tiny shell and `prlimit`
        do this instead of a Python `preexec_fn`, which is not safe in a threaded parent (episodes
        run in threads) and rules out the fast spawn path."""
        limits = self.limits
        memory, size = limits.memory_mb * 2**20, limits.file_mb * 2**20
        rlimits = [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", f"--as={memory}", f"--fsize={size}",
                   "--core=0"]  # fmt: skip
        if os.getuid() != 0:  # root ignores RLIMIT_NPROC: it gets a pids cgroup instead
            rlimits.append(f"--nproc={_processes_of(os.getuid()) + limits.processes}")
        procs = str(cgroup / "cgroup.procs") if cgroup is not None else "/dev/null"
        join = 'echo $$ > "$1" || exit 125; shift; exec "$@"'  # the shell's pid is the code's: exec keeps it
        return ["/bin/sh", "-c", join, "sh", procs, PRLIMIT, *rlimits, "--", *command]

    def _execute(self, work: Path, scratch: Path) -> SandboxResult:
        out_path, err_path = work / "stdout", work / "stderr"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch)}
        start = time.perf_counter()
        with _pids_cgroup(self.limits.processes) as cgroup, out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                self._limited(self._command(scratch), cgroup), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                cwd=scratch, env=env, start_new_session=True,
            )  # fmt: skip
            # a timer kills it at the wall limit; `wait()` with a timeout would poll in sleeps of up to
            # 50 ms, adding that much to every call
            timed_out = threading.Event()

            def stop() -> None:
                timed_out.set()
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)

            timer = threading.Timer(self.limits.wall_seconds, stop)
            timer.start()
            try:
                process.wait()
            finally:
                timer.cancel()
        seconds = time.perf_counter() - start
        stdout, cut_out = _read_capped(out_path, self.limits.output_bytes)
        stderr, cut_err = _read_capped(err_path, self.limits.output_bytes)
        error = _stop_reason(process.returncode, timed_out.is_set(), stderr, self.limits)
        return SandboxResult(stdout, stderr, process.returncode, seconds, error, cut_out or cut_err)


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                count += entry.stat().st_uid == uid
    return count


PIDS_HIERARCHIES = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


@contextmanager
def _pids_cgroup(limit: int) -> Iterator[Path | None]:
    """A fresh pids cgroup capped at `limit` processes, when this process may make one (root, with
    a writable pids hierarchy); None otherwise. Whatever is left in it is killed on exit."""
    group = None
    if os.getuid() == 0:
        for root in PIDS_HIERARCHIES:
            candidate = root / f"toolscale-sandbox-{os.getpid()}-{time.monotonic_ns()}"
            try:
                candidate.mkdir()
            except OSError:
                continue
            if (candidate / "pids.max").exists():
                (candidate / "pids.max").write_text(str(limit))
                group = candidate
                break
            candidate.rmdir()
    try:
        yield group
    finally:
        if group is not None:
            _empty_and_remove(group)


def _empty_and_remove(group: Path) -> None:
    for _ in range(500):
        pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        if not pids:
            break
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)
    with suppress(OSError):
        group.rmdir()


def process_limit_enforced() -> bool:
    """Whether the sandbox can cap the number of processes here (a pids cgroup, or a non-root user)."""
    if os.getuid() != 0:
        return True
    with _pids_cgroup(1) as group:
        return group is not None


def _read_capped(path: Path, limit: int) -> tuple[str, bool]:
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


def _signal_of(code: int | None) -> int | None:
    """The signal that ended the code: Popen reports -N, bubblewrap passes on 128 + N."""
    if code is None:
        return None
    if code < 0:
        return -code
    return code - 128 if 128 < code < 160 else None


def _stop_reason(code: int | None, timed_out: bool, stderr: str, limits: SandboxLimits) -> str | None:
    number = _signal_of(code)
    if timed_out:
        return f"stopped: ran longer than {limits.wall_seconds:g} s (wall clock)"
    if number in (signal.SIGXCPU, signal.SIGKILL) and "MemoryError" not in stderr:
        return f"stopped: used more than {limits.cpu_seconds} s of CPU time"
    if number == signal.SIGXFSZ or "File too large" in stderr:
        return f"stopped: wrote more than {limits.file_mb} MB (output or a file)"
    if "MemoryError" in stderr:
        return f"stopped: used more than {limits.memory_mb} MB of memory"
    if number is not None:
        return f"killed by signal {signal.Signals(number).name}"
    return None


class CodeInterpreterTool:
    """`code_interpreter`: run Python in the sandbox and show its output (or why it was stopped)."""

    name = "code_interpreter"

    def __init__(self, sandbox: Sandbox | None = None, prices: PriceTable | None = None) -> None:
        self.sandbox = sandbox or Sandbox()
        self.prices = prices or default_prices()

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": (
                    "Run a Python 3 program in an isolated sandbox (no network, no files but a scratch "
                    f"directory, {self.sandbox.limits.cpu_seconds} s of CPU) and return what it prints."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "The program; print what you need."}},
                    "required": ["code"],
                    "additionalProperties": False,
                },
            },
        }

    def call(self, arguments: Any) -> ToolOutput:
        code = arguments.get("code") if isinstance(arguments, dict) else None
        if not isinstance(code, str) or set(arguments) != {"code"}:
            return ToolOutput("Error: arguments must be {\"code\": \"<python source>\"}", False, Usage(calls=1),
                              "invalid_arguments")  # fmt: skip
        result = self.sandbox.run(code)
        usage = self.prices.sandbox_run(result.seconds)
        if result.ok:
            text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
            return ToolOutput(text + ("\n[output truncated]" if result.truncated else ""), True, usage)
        reason = result.error or f"the program failed (exit code {result.exit_code})"
        parts = [f"Error: {reason}"]
        for label, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text.strip():
                parts.append(f"[{label}]\n{text[-2000:].strip()}")
        return ToolOutput("\n".join(parts), False, usage, "sandbox")
