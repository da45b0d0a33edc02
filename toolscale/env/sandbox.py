"""A sandbox for model-written Python: bubblewrap isolation plus resource limits.

What it guarantees when bubblewrap (`bwrap`) is available (the default, and required):
- **filesystem**: the code sees a fresh scratch directory (`/scratch`, its working directory and
  HOME: a tmpfs of `scratch_mb`, holding only `main.py` at the start and discarded afterwards), a
  `/dev/shm` tmpfs of `shm_mb`, the Python installation and system libraries *read-only*, a
  private `/proc` and a minimal read-only `/dev`. Nothing else of the host exists for it: no home
  directories, no project checkout, no `/etc`, no host temporary directory;
- **no host paths**: the interpreter is one under `/usr` (this one, or the system's Python of the
  same version), bubblewrap reads its options from a pipe, and the environment is cleared, so
  neither the command lines and mounts in `/proc` nor the environment show where things are on the
  host. Only where no Python of this version lives under `/usr` is this one's prefix bound at
  `/opt/python`, and then its host path shows in /proc/self/mountinfo and `sysconfig` (reported by
  `missing_protections()`);
- **network**: none (a new network namespace with no interfaces up): not the internet, not
  services on the host's 127.0.0.1;
- **processes**: its own PID namespace (it cannot see or signal host processes) and at most
  `processes` processes (a pids cgroup when run as root, RLIMIT_NPROC otherwise; where neither
  is possible the cap is missing, which `process_limit_enforced()` reports); everything is killed
  when the run ends or the parent dies;
- **privileges**: its own user namespace with every capability dropped, no further user
  namespaces (`--disable-userns`), and the sandbox's root directory read-only, so `chroot`,
  `mount`, raw sockets and writes outside `/scratch` and `/dev/shm` all fail;
- **system calls**: a seccomp filter refuses (EPERM) what a code interpreter never needs: tracing
  or reading other processes, namespaces and mounts, kernel keyrings, modules, bpf, perf,
  userfaultfd, io_uring, and memory no limit counts (memfd, SysV shared memory); a system call
  through a foreign ABI (32-bit x86) kills the process;
- **environment**: cleared; only PATH, HOME and TMPDIR are set (and LD_LIBRARY_PATH when the
  interpreter needs its own `lib`);
- **limits**: CPU seconds, wall-clock seconds, address space, size of any file it writes
  (stdout and stderr included: runaway output is stopped, then cut to `output_bytes`), and the
  two tmpfs sizes. The memory the code can hold is at most `memory_mb` (address space) +
  `scratch_mb` + `shm_mb` (tmpfs pages are not part of any address space).

Where this host's bubblewrap or CPU lacks a piece, `missing_protections()` says which, in words.

Without bubblewrap it refuses to run code unless `allow_unisolated=True`, in which case only the
resource limits, a scratch working directory and a cleared environment apply: the code can read
what the current user can read and reach the network. Use that only for trusted code.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Any

from toolscale.env.tools import ToolOutput
from toolscale.pricing import PriceTable, Usage, default_prices

MiB = 2**20


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 5
    wall_seconds: float = 10.0
    memory_mb: int = 512
    output_bytes: int = 20_000  # what the agent sees, per stream
    file_mb: int = 8  # any file written, stdout and stderr included
    processes: int = 16
    scratch_mb: int = 64  # the /scratch tmpfs, main.py included
    shm_mb: int = 64  # the /dev/shm tmpfs (POSIX shared memory, multiprocessing); 0: no writable /dev/shm

    def __post_init__(self) -> None:
        # a tmpfs of size 0 is *unlimited*, and a zero rlimit stops everything: both are mistakes
        for field in fields(self):
            value = getattr(self, field.name)
            smallest = 0 if field.name == "shm_mb" else 1
            if isinstance(value, bool) or not isinstance(value, int | float) or value < smallest:
                raise ValueError(f"SandboxLimits.{field.name} must be a number >= {smallest}, not {value!r}")


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
SANDBOX_PATH = "/usr/bin:/bin"
SANDBOX_PREFIX = "/opt/python"  # where an interpreter installed outside /usr appears inside


@dataclass(frozen=True)
class BubblewrapSupport:
    """A working bwrap and the hardening options it has (both came late: `--size` for a tmpfs,
    `--disable-userns` in 0.8.0, which the kernel must also allow)."""

    path: str
    sized_tmpfs: bool
    disable_userns: bool


@functools.cache
def bubblewrap_support() -> BubblewrapSupport | None:
    """This host's bwrap, if installed and allowed to create namespaces here; None otherwise."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
        sized = "--size" in usage
        if "--disable-userns" in usage and _bwrap_starts(path, "--unshare-user", "--disable-userns"):
            return BubblewrapSupport(path, sized, disable_userns=True)
        return BubblewrapSupport(path, sized, disable_userns=False) if _bwrap_starts(path) else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _bwrap_starts(path: str, *options: str) -> bool:
    probe = subprocess.run(
        [path, "--unshare-all", *options, "--die-with-parent", "--ro-bind", "/", "/", "true"],
        capture_output=True, timeout=10,
    )  # fmt: skip
    return probe.returncode == 0


def bubblewrap() -> str | None:
    """The path of a *working* bwrap (installed and allowed to create namespaces here), or None."""
    support = bubblewrap_support()
    return support.path if support else None


def missing_protections() -> list[str]:
    """What this host cannot enforce of the module's guarantees, each in words; empty when all hold."""
    support = bubblewrap_support()
    if support is None:
        return ["no working bubblewrap: code is refused unless allow_unisolated=True, and then runs unisolated"]
    gaps = []
    if not support.sized_tmpfs:
        gaps.append(f"{support.path} has no --size: /scratch is a tmpfs without a cap (RLIMIT_FSIZE still caps "
                    "each file) and there is no writable /dev/shm")  # fmt: skip
    if not support.disable_userns:
        gaps.append(f"{support.path} has no working --disable-userns: only the seccomp filter stops new user "
                    "namespaces")  # fmt: skip
    python, prefix = _interpreter()
    if not (_within(python, "/usr") and _within(prefix, "/usr")):
        gaps.append(f"the interpreter's install path ({prefix}) shows through to the code (in /proc/self/mountinfo "
                    f"and sysconfig): install python{sys.version_info.major}.{sys.version_info.minor} under /usr "
                    "(apt-get install python3) to hide it")  # fmt: skip
    if seccomp_filter() is None:
        gaps.append(f"no seccomp filter: the sandbox knows the system calls of x86_64 and aarch64, not of "
                    f"{platform.machine()} ({struct.calcsize('P') * 8}-bit Python)")  # fmt: skip
    return gaps


def _interpreter() -> tuple[str, str]:
    """The real Python binary (not a venv shim) and the installation prefix it needs: this one where
    it lives under /usr, else the system's own Python of the same version where there is one. A
    prefix elsewhere (pyenv, uv, conda) can be bound at a neutral path but still shows through: the
    bind's source is in /proc/self/mountinfo and the build's prefix in `sysconfig`."""
    python, prefix = os.path.realpath(sys.executable), sys.base_prefix
    if _within(python, "/usr") and _within(prefix, "/usr"):
        return python, prefix
    system = _system_python(f"{sys.version_info.major}.{sys.version_info.minor}")
    return (system, "/usr") if system is not None else (python, prefix)


@functools.cache
def _system_python(version: str) -> str | None:
    """/usr's python`version`, if it exists and starts (the sandbox runs its code with no packages,
    so any working build of the same version behaves the same)."""
    for name in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        python = os.path.realpath(name)
        if not (_within(python, "/usr") and os.access(python, os.X_OK)):
            continue
        with suppress(OSError, subprocess.SubprocessError):
            probe = subprocess.run([python, "-I", "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                                   text=True, timeout=30, env={"PATH": SANDBOX_PATH})  # fmt: skip
            if probe.returncode == 0 and _within(probe.stdout.strip(), "/usr"):
                return python
    return None


@dataclass(frozen=True)
class PythonLayout:
    """How the interpreter appears inside the sandbox."""

    binds: tuple[tuple[str, str], ...]  # (host path, sandbox path), read-only, beyond /usr
    executable: str  # its path inside
    env: tuple[tuple[str, str], ...]  # what it needs in the environment


def _within(path: str, folder: str) -> bool:
    return PurePosixPath(path).is_relative_to(folder)


@functools.cache
def python_layout() -> PythonLayout:
    """The interpreter at a path that says nothing of the host. Under /usr it is already neutral (and
    bound with /usr); elsewhere (pyenv, uv, conda: a path with a home directory or a project in it)
    its whole prefix is bound at /opt/python, from where Python finds its standard library on its own."""
    python, prefix = _interpreter()
    if _within(python, "/usr") and _within(prefix, "/usr"):
        return PythonLayout((), python, ())
    if not _within(python, prefix):  # an unusual install: run it where it is, host path and all
        return PythonLayout(((prefix, prefix),), python, ())
    executable = str(PurePosixPath(SANDBOX_PREFIX) / PurePosixPath(python).relative_to(prefix))
    # a shared-library build finds libpython through a RUNPATH naming the host prefix: point the
    # loader at the neutral one instead
    shared = glob.glob(os.path.join(prefix, "lib", "libpython3*.so*"))
    env = (("LD_LIBRARY_PATH", f"{SANDBOX_PREFIX}/lib"),) if shared else ()
    return PythonLayout(((prefix, SANDBOX_PREFIX),), executable, env)


# --- the seccomp filter -------------------------------------------------------------------------
#
# System calls a code interpreter never needs, refused with EPERM. Each is a way out (another
# process's memory or files, namespaces and mounts, the kernel's keyrings, modules, swap and
# power), a large kernel attack surface (bpf, perf, userfaultfd, io_uring, file handles), or
# memory that no limit counts (a memfd or SysV shared memory or message queue is outside
# RLIMIT_AS and the bounded tmpfs mounts). Numbers: (x86_64, aarch64), from
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h; None where the
# architecture has no such call.
DENIED_SYSCALLS: dict[str, tuple[int, int | None]] = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "open_by_handle_at": (304, 265),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "swapon": (167, 224), "swapoff": (168, 225),
    "reboot": (169, 142), "iopl": (172, None), "ioperm": (173, None),
    "memfd_create": (319, 279), "shmget": (29, 194), "msgget": (68, 186),
}  # fmt: skip


@dataclass(frozen=True)
class SyscallABI:
    audit_arch: int  # AUDIT_ARCH_* (linux/audit.h): which ABI a system call came in through
    column: int  # its column in DENIED_SYSCALLS
    clone: int
    clone3: int
    x32: bool  # x86_64's x32 ABI shares AUDIT_ARCH_X86_64: its numbers carry bit 30


ABIS = {
    "x86_64": SyscallABI(0xC000003E, 0, clone=56, clone3=435, x32=True),
    "aarch64": SyscallABI(0xC00000B7, 1, clone=220, clone3=435, x32=False),
}
ABIS["amd64"], ABIS["arm64"] = ABIS["x86_64"], ABIS["aarch64"]

# classic BPF (linux/filter.h, linux/bpf_common.h) and seccomp (linux/seccomp.h)
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, ENOSYS = 1, 38
# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (little-endian
# on both architectures, so the low half of args[0] is at 16)
NR_OFFSET, ARCH_OFFSET, ARG0_LOW_OFFSET = 0, 4, 16
X32_SYSCALL_BIT = 0x40000000
# clone flags that make a namespace (linux/sched.h): NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
CLONE_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

Instruction = tuple[int, int, int | str, int | str]  # (code, k, jump if true, jump if false); str: a label


def _assemble(program: Sequence[Instruction | str]) -> bytes:
    """struct sock_filter[] for `program`, whose jumps may name labels (the strings in it)."""
    labels, count = {}, 0
    for item in program:
        if isinstance(item, str):
            labels[item] = count
        else:
            count += 1
    out, position = [], 0
    for item in program:
        if isinstance(item, str):
            continue
        code, k, *jumps = item
        position += 1
        offsets = [labels[jump] - position if isinstance(jump, str) else jump for jump in jumps]
        if not all(0 <= offset <= 255 for offset in offsets):
            raise ValueError(f"BPF jump out of range at instruction {position - 1}: {offsets}")
        out.append(struct.pack("=HBBI", code, *offsets, k))
    return b"".join(out)


@functools.cache
def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter for `machine` (default: this one), for `bwrap --seccomp`; None where the
    sandbox does not know the system call numbers (or Python is not 64-bit)."""
    abi = ABIS.get(machine or platform.machine())
    if abi is None or struct.calcsize("P") != 8:
        return None
    denied = sorted({numbers[abi.column] for numbers in DENIED_SYSCALLS.values()} - {None})
    program: list[Instruction | str] = [
        (BPF_LD_W_ABS, ARCH_OFFSET, 0, 0),
        (BPF_JEQ_K, abi.audit_arch, 0, "kill"),  # a foreign ABI has other numbers: nothing here would hold
        (BPF_LD_W_ABS, NR_OFFSET, 0, 0),
    ]
    if abi.x32:
        program.append((BPF_JGE_K, X32_SYSCALL_BIT, "deny", 0))
    # clone3 passes its flags in memory, out of a filter's sight: ENOSYS makes libc fall back to
    # clone, whose flags are an argument the filter checks
    program += [(BPF_JEQ_K, abi.clone, "clone", 0), (BPF_JEQ_K, abi.clone3, "nosys", 0)]
    program += [(BPF_JEQ_K, number, "deny", 0) for number in denied]
    program += [
        (BPF_RET_K, SECCOMP_RET_ALLOW, 0, 0),
        "clone",
        (BPF_LD_W_ABS, ARG0_LOW_OFFSET, 0, 0),
        (BPF_JSET_K, CLONE_NEW_NAMESPACES, "deny", 0),
        (BPF_RET_K, SECCOMP_RET_ALLOW, 0, 0),
        "deny",
        (BPF_RET_K, SECCOMP_RET_ERRNO | EPERM, 0, 0),
        "nosys",
        (BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS, 0, 0),
        "kill",
        (BPF_RET_K, SECCOMP_RET_KILL_PROCESS, 0, 0),
    ]
    return _assemble(program)


# --- passing data to bwrap ----------------------------------------------------------------------


def _pipe_holding(data: bytes, fds: list[int]) -> int:
    """The read end of a pipe already holding `data` (its write end closed). What bwrap reads from a
    pipe is gone once read: even a leaked descriptor would show the code nothing."""
    read, write = os.pipe()
    fds.append(read)
    try:
        if len(data) > fcntl.fcntl(write, fcntl.F_GETPIPE_SZ):  # a longer write would block: no reader yet
            raise ValueError(f"{len(data)} bytes do not fit in a pipe")
        os.write(write, data)
    finally:
        os.close(write)
    return read


def _memfd_holding(name: str, data: bytes, fds: list[int]) -> int:
    """An in-memory file holding `data`, at offset 0 (for a payload of any size, unlike a pipe)."""
    fd = os.memfd_create(name)
    fds.append(fd)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@contextmanager
def _closing_fds() -> Iterator[list[int]]:
    fds: list[int] = []
    try:
        yield fds
    finally:
        for fd in fds:
            with suppress(OSError):
                os.close(fd)


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
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        if self.isolation == "none" and not self.allow_unisolated:
            return _refused("no isolation available: install bubblewrap (apt-get install bubblewrap) to run code; "
                            "refusing to run it unisolated")  # fmt: skip
        try:
            source = code.encode("utf-8")
        except UnicodeEncodeError as error:
            return _refused(f"the program is not valid text: {error.reason} at character {error.start}")
        room = min(self.limits.file_mb, self.limits.scratch_mb) * MiB
        if len(source) > room:
            return _refused(f"the program is {len(source):,} bytes; the sandbox takes at most {room:,}")
        if self.isolation == "none":
            return self._run_unisolated(source)
        return self._run_isolated(source)

    def _run_unisolated(self, source: bytes) -> SandboxResult:
        python, _ = _interpreter()
        with tempfile.TemporaryDirectory(prefix="toolscale-sandbox-") as folder:
            main = Path(folder) / "main.py"
            main.write_bytes(source)
            env = {"PATH": SANDBOX_PATH, "HOME": folder, "TMPDIR": folder}
            return self._execute([python, "-I", str(main)], env, cwd=folder)

    def _run_isolated(self, source: bytes) -> SandboxResult:
        support = bubblewrap_support()
        if support is None:  # `isolation` said bubblewrap: only a patched `bubblewrap()` gets here
            return _refused("bubblewrap stopped working on this host")
        layout, seccomp = python_layout(), seccomp_filter()
        with _closing_fds() as fds:
            code_fd = _memfd_holding("main.py", source, fds)
            seccomp_fd = _pipe_holding(seccomp, fds) if seccomp is not None else None
            options = self._bwrap_options(support, layout, code_fd, seccomp_fd)
            # every option (host paths included) goes through a pipe, so bwrap's own command line, which the
            # code can read in /proc/1/cmdline, is `bwrap --args N <python> -I /scratch/main.py`
            options_fd = _pipe_holding(b"".join(option.encode() + b"\0" for option in options), fds)
            command = [support.path, "--args", str(options_fd), layout.executable, "-I", "/scratch/main.py"]
            # bwrap's own environment is readable in /proc/1/environ: nothing in it but PATH
            return self._execute(command, {"PATH": SANDBOX_PATH}, cwd="/", pass_fds=tuple(fds))

    def _bwrap_options(
        self, support: BubblewrapSupport, layout: PythonLayout, code_fd: int, seccomp_fd: int | None
    ) -> list[str]:
        limits = self.limits
        options = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
        if support.disable_userns:
            options += ["--unshare-user", "--disable-userns"]  # --unshare-all only *tries* a user namespace
        options += ["--ro-bind", "/usr", "/usr"]
        for host, inside in layout.binds:
            options += ["--ro-bind", host, inside]
        for system_dir in ("/bin", "/lib", "/lib64", "/sbin"):
            if os.path.exists(system_dir):
                link = os.path.islink(system_dir)
                options += ["--symlink", os.readlink(system_dir), system_dir] if link else [
                    "--ro-bind", system_dir, system_dir]  # fmt: skip
        options += ["--proc", "/proc", "--dev", "/dev"]
        # The writable places are tmpfs mounts of a fixed size (a plain tmpfs may take half the host's
        # RAM, and a bind of a host folder has no quota). /scratch is not a host folder: main.py is
        # copied in from a memfd (--file), so there is nothing on the host to fill or to leave behind.
        if support.sized_tmpfs:
            if limits.shm_mb:
                options += ["--perms", "1777", "--size", str(limits.shm_mb * MiB), "--tmpfs", "/dev/shm"]
            options += ["--size", str(limits.scratch_mb * MiB), "--tmpfs", "/scratch"]
        else:  # see missing_protections()
            options += ["--tmpfs", "/scratch"]
        # --dev's own tmpfs has no size either: read-only, it holds nothing the code writes
        options += ["--remount-ro", "/dev", "--file", str(code_fd), "/scratch/main.py", "--chdir", "/scratch"]
        env = [("HOME", "/scratch"), ("TMPDIR", "/scratch"), ("PATH", SANDBOX_PATH), *layout.env]
        for name, value in env:
            options += ["--setenv", name, value]
        if seccomp_fd is not None:
            options += ["--seccomp", str(seccomp_fd)]  # loaded last thing before the exec of python
        # the root of the sandbox (a tmpfs holding the mount points) is made read-only last
        return [*options, "--remount-ro", "/"]

    def _limited(self, command: list[str], cgroup: Path | None) -> list[str]:
        """`command` wrapped so that, before it starts, the process joins the pids cgroup and takes
        its resource limits (inherited by everything the code starts). A tiny shell and `prlimit`
        do this instead of a Python `preexec_fn`, which is not safe in a threaded parent (episodes
        run in threads) and rules out the fast spawn path."""
        limits = self.limits
        memory, size = limits.memory_mb * MiB, limits.file_mb * MiB
        rlimits = [f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}", f"--as={memory}", f"--fsize={size}",
                   "--core=0"]  # fmt: skip
        if os.getuid() != 0:  # root ignores RLIMIT_NPROC: it gets a pids cgroup instead
            rlimits.append(f"--nproc={_processes_of(os.getuid()) + limits.processes}")
        procs = str(cgroup / "cgroup.procs") if cgroup is not None else "/dev/null"
        join = 'echo $$ > "$1" || exit 125; shift; exec "$@"'  # the shell's pid is the code's: exec keeps it
        return ["/bin/sh", "-c", join, "sh", procs, PRLIMIT, *rlimits, "--", *command]

    def _execute(
        self, command: list[str], env: dict[str, str], cwd: str, pass_fds: tuple[int, ...] = ()
    ) -> SandboxResult:
        start = time.perf_counter()
        # stdout and stderr are memfds: RLIMIT_FSIZE caps them like files, and inside the sandbox
        # /proc/self/fd/1 reads `/memfd:stdout`, not a host path
        with _pids_cgroup(self.limits.processes) as cgroup, _closing_fds() as outputs:
            out, err = os.memfd_create("stdout"), os.memfd_create("stderr")
            outputs += [out, err]
            process = subprocess.Popen(
                self._limited(command, cgroup), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                cwd=cwd, env=env, start_new_session=True, pass_fds=pass_fds,
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
            stdout, cut_out = _read_capped(out, self.limits.output_bytes)
            stderr, cut_err = _read_capped(err, self.limits.output_bytes)
        seconds = time.perf_counter() - start
        error = _stop_reason(process.returncode, timed_out.is_set(), stderr, self.limits)
        return SandboxResult(stdout, stderr, process.returncode, seconds, error, cut_out or cut_err)


def _refused(reason: str) -> SandboxResult:
    return SandboxResult("", "", None, 0.0, reason)


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


def _read_capped(fd: int, limit: int) -> tuple[str, bool]:
    data = os.pread(fd, limit + 1, 0)
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
    if code != 0 and "No space left on device" in stderr:
        return (f"stopped: filled its disk space ({limits.scratch_mb} MB in /scratch, {limits.shm_mb} MB in "
                "/dev/shm)")  # fmt: skip
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

    def cost_bound(self, arguments: Any, messages: list[dict[str, Any]]) -> float:
        return self.sandbox.limits.wall_seconds * self.prices.sandbox_per_second

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
