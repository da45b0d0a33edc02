"""The code interpreter's sandbox against the escapes of issue 13 (finding 2), on the real bubblewrap:
the writable tmpfs mounts are capped, no new user namespaces, a seccomp filter refuses what a code
interpreter never needs (tracing, mounts, keyrings, bpf, ...), and nothing inside shows a host path.
Each test runs one short program in the sandbox and checks a bounded outcome."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from toolscale.env.sandbox import (
    CodeInterpreterTool,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    bubblewrap,
    bubblewrap_support,
    missing_protections,
    seccomp_filter,
)

MiB = 2**20
CAP_MB = 16  # both tmpfs mounts: small, so that filling one takes a moment
LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=10, memory_mb=512, output_bytes=20_000, file_mb=2, processes=16,
                       scratch_mb=CAP_MB, shm_mb=CAP_MB)  # fmt: skip
# RLIMIT_FSIZE far above the caps: what stops a single big file is then the tmpfs, not the rlimit
BIG_FILES = SandboxLimits(**{**LIMITS.__dict__, "file_mb": 512})

SUPPORT = bubblewrap_support()
needs_bwrap = pytest.mark.skipif(
    bubblewrap() is None and not os.environ.get("CI"), reason="bubblewrap is not installed (CI installs it)"
)
needs_sized_tmpfs = pytest.mark.skipif(
    SUPPORT is not None and not SUPPORT.sized_tmpfs, reason="; ".join(missing_protections()) or "no --size"
)
needs_seccomp = pytest.mark.skipif(
    seccomp_filter() is None, reason=f"no seccomp filter for {platform.machine()} in the sandbox"
)
on_x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="an x86_64 ABI check")

# this test's own table of the system calls it makes through syscall(2): (x86_64, aarch64)
NUMBERS = {
    "clone": (56, 220), "clone3": (435, 435), "pivot_root": (155, 41), "keyctl": (250, 219), "add_key": (248, 217),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "pidfd_open": (434, 434), "pidfd_getfd": (438, 438),
}  # fmt: skip
COLUMN = 1 if platform.machine() in ("aarch64", "arm64") else 0
SYSCALLS = {name: pair[COLUMN] for name, pair in NUMBERS.items()}


def run(code: str, limits: SandboxLimits = LIMITS) -> SandboxResult:
    return Sandbox(limits).run(code)


def run_json(code: str, limits: SandboxLimits = LIMITS) -> object:
    result = run(code, limits)
    assert result.ok, result
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the tmpfs mounts are capped ------------------------------------------------------------------

# writes `total` bytes under `folder` in files of `per_file` bytes, until an error stops it; prints
# what was written, the error and the file system's size
FILL = """
import errno, json, os
folder, total, per_file = {folder!r}, {total}, {per_file}
written, error, block = 0, None, b"x" * (256 * 1024)
try:
    for n in range(total // per_file):
        fd = os.open(os.path.join(folder, f"fill{{n}}"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for _ in range(per_file // len(block)):
                written += os.write(fd, block)
        finally:
            os.close(fd)
except OSError as e:
    error = errno.errorcode[e.errno]
stat = os.statvfs(folder)
print(json.dumps({{"written": written, "error": error, "size": stat.f_blocks * stat.f_frsize}}))
"""

FALLOCATE = """
import errno, json, os
fd = os.open({folder!r} + "/big", os.O_WRONLY | os.O_CREAT, 0o600)
try:
    os.posix_fallocate(fd, 0, {total})
    error = None
except OSError as e:
    error = errno.errorcode[e.errno]
stat = os.statvfs({folder!r})
print(json.dumps({{"written": os.fstat(fd).st_blocks * 512, "error": error, "size": stat.f_blocks * stat.f_frsize}}))
"""

# (name, program, limits): each tries to put 200 MB in a 16 MB tmpfs
FILLS = [
    ("200 files of 1 MB", FILL, 1 * MiB, LIMITS),
    ("one 200 MB file", FILL, 200 * MiB, BIG_FILES),
    ("fallocate 200 MB", FALLOCATE, 200 * MiB, BIG_FILES),
]


def assert_capped(outcome: dict[str, object]) -> None:
    cap = CAP_MB * MiB
    assert outcome["size"] == cap, outcome  # the mount is the size asked for, not half the host's RAM
    assert outcome["error"] == "ENOSPC", outcome  # the tmpfs said so, not RLIMIT_FSIZE (EFBIG)
    assert outcome["written"] <= cap, outcome


@needs_bwrap
@needs_sized_tmpfs
@pytest.mark.parametrize(("program", "per_file", "limits"), [f[1:] for f in FILLS], ids=[f[0] for f in FILLS])
@pytest.mark.parametrize("folder", ["/dev/shm", "/scratch"])
def test_filling_a_writable_mount_stops_at_its_cap(folder, program, per_file, limits):
    outcome = run_json(program.format(folder=folder, total=200 * MiB, per_file=per_file), limits)
    assert_capped(outcome)
    if program is FILL:
        assert outcome["written"] >= cap_minus_main_py(), outcome  # it was the cap that stopped it


def cap_minus_main_py() -> int:
    return CAP_MB * MiB - MiB  # main.py, and the odd block of metadata, share the space


@needs_bwrap
@needs_sized_tmpfs
def test_shared_memory_past_the_cap_is_a_bus_error():
    # an mmap of /dev/shm is not part of the address space limit's story: the tmpfs is what stops it
    code = (
        "from multiprocessing import shared_memory\n"
        "block = shared_memory.SharedMemory(create=True, size=200 * 2**20)\n"
        "print('mapped', flush=True)\n"
        "for offset in range(0, block.size, 4096):\n"
        "    block.buf[offset] = 1\n"
        "print('filled 200 MB')"
    )
    result = run(code, BIG_FILES)  # a 200 MB file: past RLIMIT_FSIZE in LIMITS
    assert result.stdout.strip() == "mapped" and result.error == "killed by signal SIGBUS", result


@needs_bwrap
@needs_sized_tmpfs
def test_the_agent_is_told_the_disk_is_full():
    code = "import os\nfor n in range(100):\n    open(f'f{n}', 'wb').write(b'x' * 2**20)"
    output = CodeInterpreterTool(Sandbox(LIMITS)).call({"code": code})
    assert not output.ok and output.content.startswith("Error: stopped: filled its disk space (16 MB in /scratch")


@needs_bwrap
@needs_sized_tmpfs
@pytest.mark.parametrize("path", ["/dev/evil", "/dev/shm/evil"])
def test_without_shm_dev_is_read_only(path):
    result = run(f"open({path!r}, 'w').write('x')", SandboxLimits(**{**LIMITS.__dict__, "shm_mb": 0}))
    assert not result.ok and "Read-only file system" in result.stderr, result


# --- no new namespaces, no tracing, no kernel interfaces ---------------------------------------------

ATTEMPT = """
import ctypes, errno, json, os, time
libc = ctypes.CDLL(None, use_errno=True)
sc = {syscalls!r}
def attempt():
{body}
ctypes.set_errno(0)
try:
    result, number = attempt(), ctypes.get_errno()
except OSError as error:
    result, number = -1, error.errno
print(json.dumps([result, errno.errorcode.get(number, number)]))
"""

CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17

# (name, body of attempt(), the errno it must fail with)
NAMESPACES = [
    ("unshare user", f"return libc.unshare({CLONE_NEWUSER})", "EPERM"),
    ("unshare mount", f"return libc.unshare({CLONE_NEWNS})", "EPERM"),
    ("clone user", f"return libc.syscall(sc['clone'], ctypes.c_ulong({CLONE_NEWUSER | SIGCHLD}), None, None, None, "
                   "None)", "EPERM"),
    ("setns user", f"return libc.setns(os.open('/proc/self/ns/user', os.O_RDONLY), {CLONE_NEWUSER})", "EPERM"),
    # clone3's flags are out of the filter's sight: refused as missing, so libc falls back to clone
    ("clone3 user", f"args = (ctypes.c_uint64 * 11)({CLONE_NEWUSER}, 0, 0, 0, {SIGCHLD})\n"
                    "return libc.syscall(sc['clone3'], args, ctypes.c_size_t(88))", "ENOSYS"),
]  # fmt: skip

TRACING = [
    ("PTRACE_TRACEME", "return libc.ptrace(0, 0, None, None)", "EPERM"),
    ("PTRACE_ATTACH a child", "pid = os.fork()\nif pid == 0:\n    time.sleep(5)\n    os._exit(0)\n"
                              "result = libc.ptrace(16, pid, None, None)\nos.kill(pid, 9)\nreturn result", "EPERM"),
    ("process_vm_readv", "src, dst = ctypes.c_uint64(7), ctypes.c_uint64(0)\n"
                         "local = (ctypes.c_size_t * 2)(ctypes.addressof(dst), 8)\n"
                         "remote = (ctypes.c_size_t * 2)(ctypes.addressof(src), 8)\n"
                         "return libc.process_vm_readv(os.getpid(), local, 1, remote, 1, 0)", "EPERM"),
    ("pidfd_getfd", "pidfd = libc.syscall(sc['pidfd_open'], os.getpid(), 0)\n"
                    "return libc.syscall(sc['pidfd_getfd'], pidfd, 1, 0)", "EPERM"),
]  # fmt: skip

KERNEL = [
    ("mount tmpfs", "return libc.mount(b'none', b'/scratch', b'tmpfs', 0, None)", "EPERM"),
    ("umount /proc", "return libc.umount2(b'/proc', 2)", "EPERM"),
    ("pivot_root", "return libc.syscall(sc['pivot_root'], b'/scratch', b'/scratch')", "EPERM"),
    ("chroot", "return libc.chroot(b'/scratch')", "EPERM"),
    ("keyctl", "return libc.syscall(sc['keyctl'], 0, ctypes.c_long(-3), 1)", "EPERM"),
    ("add_key", "return libc.syscall(sc['add_key'], b'user', b'k', b'v', 1, ctypes.c_long(-3))", "EPERM"),
    ("bpf", "return libc.syscall(sc['bpf'], 5, None, 0)", "EPERM"),
    ("perf_event_open", "return libc.syscall(sc['perf_event_open'], None, 0, -1, -1, 0)", "EPERM"),
    ("userfaultfd", "return libc.syscall(sc['userfaultfd'], 0)", "EPERM"),
    ("io_uring_setup", "return libc.syscall(sc['io_uring_setup'], 1, ctypes.create_string_buffer(120))", "EPERM"),
    ("memfd_create", "return os.memfd_create('x')", "EPERM"),
    ("SysV shmget", "return libc.shmget(0, 2**20, 0o1600)", "EPERM"),
    ("SysV msgget", "return libc.msgget(0, 0o1600)", "EPERM"),
]  # fmt: skip


def attempt(body: str) -> list[object]:
    return run_json(ATTEMPT.format(syscalls=SYSCALLS, body=textwrap.indent(body, "    ")))  # type: ignore[return-value]


@needs_bwrap
@needs_seccomp
@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in NAMESPACES], ids=[c[0] for c in NAMESPACES])
def test_no_new_namespaces(body, expected):
    assert attempt(body) == [-1, expected]


@needs_bwrap
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1) on this host")
@pytest.mark.parametrize("flags", ["-U", "-Ur", "-m"])
def test_the_unshare_command_fails(flags):
    code = (
        "import subprocess\n"
        f"done = subprocess.run(['unshare', {flags!r}, 'true'], capture_output=True, text=True)\n"
        "print(done.returncode, done.stderr)"
    )
    result = run(code)
    assert result.ok and not result.stdout.startswith("0 "), result
    assert "Operation not permitted" in result.stdout, result


@needs_bwrap
@needs_seccomp
@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in TRACING], ids=[c[0] for c in TRACING])
def test_no_tracing_or_reading_other_processes(body, expected):
    assert attempt(body) == [-1, expected]


@needs_bwrap
@needs_seccomp
@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in KERNEL], ids=[c[0] for c in KERNEL])
def test_kernel_interfaces_are_refused(body, expected):
    assert attempt(body) == [-1, expected]


@needs_bwrap
@needs_seccomp
@on_x86_64
def test_the_x32_abi_is_refused():
    assert attempt("return libc.syscall(0x40000000 | 39)") == [-1, "EPERM"]  # getpid, x32 numbering


@needs_bwrap
@needs_seccomp
@on_x86_64
def test_a_32_bit_system_call_kills_the_program():
    code = (
        "import ctypes, mmap\n"
        "page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))  # mov eax, 20 (getpid); int 0x80; ret\n"
        "print(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())"
    )
    result = run(code)
    assert result.error == "killed by signal SIGSYS" and result.stdout == "", result


@needs_bwrap
def test_ordinary_programs_still_work_under_the_filter():
    # threads and posix_spawn go through clone3 (refused, ENOSYS) and fall back to clone
    code = (
        "import os, subprocess, tempfile, threading\n"
        "from multiprocessing import shared_memory\n"
        "seen = []\n"
        "threads = [threading.Thread(target=seen.append, args=(n,)) for n in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "pid = os.fork()\n"
        "os._exit(0) if pid == 0 else os.waitpid(pid, 0)\n"
        "echo = subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout.strip()\n"
        "block = shared_memory.SharedMemory(create=True, size=2**20); block.buf[0] = 1; block.close(); block.unlink()\n"
        "with tempfile.NamedTemporaryFile() as f: where = os.path.dirname(f.name)\n"
        "print(sorted(seen), echo, where)"
    )
    result = run(code)
    assert result.ok and result.stdout.strip() == "[0, 1, 2, 3] hi /scratch", result


# --- nothing of the host's paths inside ----------------------------------------------------------

HOST_PATHS = [tempfile.gettempdir(), "toolscale-sandbox", "/work", ".venv", str(Path(__file__).resolve().parents[2])]
if len(str(Path.home())) > 1:
    HOST_PATHS.append(str(Path.home()))
for _path in (sys.base_prefix, os.path.realpath(sys.executable), sys.executable):
    if not _path.startswith("/usr/"):  # under /usr it is a neutral path, the one the sandbox shows too
        HOST_PATHS.append(_path)

SHOW = {
    "/proc/1/cmdline": "print(open('/proc/1/cmdline', 'rb').read())",
    "/proc/self/cmdline": "print(open('/proc/self/cmdline', 'rb').read())",
    "/proc/1/environ": "print(open('/proc/1/environ', 'rb').read())",
    "/proc/self/environ": "print(open('/proc/self/environ', 'rb').read())",
    "os.environ": "import os; print(dict(os.environ))",
    "sys": "import sys; print(sys.executable, sys.prefix, sys.base_prefix, sys.path, sys.orig_argv)",
    "open files": "import os; print([os.readlink(f'/proc/self/fd/{n}') for n in '012'])",
    "working directories": "import os; print(os.getcwd(), os.path.realpath('/proc/self/cwd'))",
    "mounts": "print(open('/proc/self/mountinfo').read())",
    "build configuration": "import sysconfig; print(sysconfig.get_config_vars())",
}


@needs_bwrap
@pytest.mark.parametrize("code", list(SHOW.values()), ids=list(SHOW))
def test_no_host_path_is_visible(code):
    result = run(code)
    assert result.ok and result.stdout.strip(), result
    leaked = [path for path in HOST_PATHS if path in result.stdout]
    assert leaked == [], result.stdout


@needs_bwrap
def test_only_the_standard_streams_are_open():
    # bwrap reads the options, the filter and main.py from descriptors: none may reach the code
    result = run("import os; print(sorted(int(n) for n in os.listdir('/proc/self/fd')))")
    assert result.ok and result.stdout.strip() == "[0, 1, 2, 3]", result  # 3: the listing's own


# --- bad input gets a clear error --------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"), [("scratch_mb", 0), ("shm_mb", -1), ("memory_mb", 0), ("cpu_seconds", "5")]
)
def test_bad_limits_are_refused(field, value):
    with pytest.raises(ValueError, match=f"SandboxLimits.{field} must be"):
        SandboxLimits(**{field: value})


@pytest.mark.parametrize(
    ("code", "reason"),
    [("#" * (3 * MiB), "the program is 3,145,728 bytes; the sandbox takes at most 2,097,152"),
     ("print('\ud800')", "the program is not valid text: surrogates not allowed at character 7")],
    ids=["too big", "not text"],
)  # fmt: skip
def test_a_program_that_cannot_be_run_is_refused(code, reason):
    result = Sandbox(LIMITS, allow_unisolated=True).run(code)
    assert result.error == reason and result.exit_code is None


def test_missing_protections_are_words():
    gaps = missing_protections()
    assert isinstance(gaps, list) and all(isinstance(gap, str) and gap for gap in gaps)


@pytest.mark.skipif(sys.base_prefix.startswith("/usr"), reason="this Python already lives under /usr")
def test_a_prefix_that_would_show_through_is_reported(monkeypatch):
    # without a Python of this version under /usr, this one's prefix is bound in: its path is then visible
    monkeypatch.setattr("toolscale.env.sandbox._system_python", lambda version: None)
    gaps = [gap for gap in missing_protections() if "install path" in gap]
    assert gaps == [gaps[0]] and sys.base_prefix in gaps[0] and "mountinfo" in gaps[0]
