"""The code interpreter's sandbox: ordinary code runs; every escape attempt is contained and the
agent sees a clear tool error. Needs bubblewrap (`.ci/run` installs it); without it the suite
checks that code is refused."""

from __future__ import annotations

import os
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolscale.env.sandbox import CodeInterpreterTool, Sandbox, SandboxLimits, bubblewrap, process_limit_enforced

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=4, memory_mb=256, output_bytes=5_000, file_mb=2, processes=16)
needs_bwrap = pytest.mark.skipif(
    bubblewrap() is None and not os.environ.get("CI"), reason="bubblewrap is not installed (CI installs it)"
)


@pytest.fixture(scope="module")
def tool() -> CodeInterpreterTool:
    return CodeInterpreterTool(Sandbox(LIMITS))


def run(tool: CodeInterpreterTool, code: str) -> tuple[bool, str]:
    output = tool.call({"code": code})
    return output.ok, output.content


@needs_bwrap
def test_ordinary_code_runs_and_its_output_comes_back(tool):
    ok, content = run(tool, "import math, json\nprint(json.dumps({'r': math.sqrt(16)}))")
    assert ok and content.strip() == '{"r": 4.0}'


@needs_bwrap
def test_scratch_directory_is_usable(tool):
    ok, content = run(
        tool, "open('notes.txt', 'w').write('hi')\nimport os\nprint(os.getcwd(), open('notes.txt').read())"
    )
    assert ok and content.strip() == "/scratch hi"


@needs_bwrap
def test_a_python_exception_is_a_tool_error(tool):
    ok, content = run(tool, "1 / 0")
    assert not ok and content.startswith("Error: the program failed (exit code 1)") and "ZeroDivisionError" in content


@needs_bwrap
def test_bad_arguments(tool):
    assert tool.call({"source": "print(1)"}).error == "invalid_arguments"
    assert tool.call("print(1)").error == "invalid_arguments"


HERE = str(Path(__file__).resolve())

# (name, code, what the agent must see): each attempt fails inside the sandbox
ESCAPES = [
    ("read /etc/passwd", "print(open('/etc/passwd').read())", "FileNotFoundError"),
    ("read /etc/shadow", "print(open('/etc/shadow').read())", "FileNotFoundError"),
    ("read the test file", f"print(open({HERE!r}).read())", "FileNotFoundError"),
    ("read root's home", "import os; print(os.listdir('/root/.ssh'))", "FileNotFoundError"),
    ("list the host's /work", "import os; print(os.listdir('/work'))", "FileNotFoundError"),
    ("write to /usr", "open('/usr/evil', 'w').write('x')", "Read-only file system"),
    ("write to /tmp", "open('/tmp/evil', 'w').write('x')", "FileNotFoundError"),
    ("write to /", "open('/evil', 'w').write('x')", "Read-only file system"),
    ("write into the python prefix", "import sys; open(sys.prefix + '/evil', 'w').write('x')", "Read-only file system"),
    ("symlink out of scratch", "import os; os.symlink('/etc/hostname', 'l'); print(open('l').read())",
     "FileNotFoundError"),
    ("outside DNS and network", "import socket; socket.create_connection(('example.com', 80), timeout=2)", "Error"),
    ("raw socket", "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)", "PermissionError"),
    ("memory bomb", "x = bytearray(8 * 1024 ** 3)", "used more than 256 MB of memory"),
    ("infinite loop", "while True: pass", "used more than 2 s of CPU time"),
    ("sleep forever", "import time; time.sleep(60)", "ran longer than 4 s"),
    ("huge output", "import sys\nwhile True: sys.stdout.write('x' * 65536)", "wrote more than 2 MB"),
    ("huge file", "f = open('big', 'wb')\nwhile True: f.write(b'x' * 65536)", "wrote more than 2 MB"),
    ("mount", "import ctypes; libc = ctypes.CDLL(None); assert libc.mount(b'none', b'/mnt', b'tmpfs', 0, None) == 0",
     "AssertionError"),
    ("chroot", "import os; os.chroot('/')", "PermissionError"),
    ("signal a host process", f"import os; os.kill({os.getpid()}, 9)", "ProcessLookupError"),
    ("shell out to cat", "import subprocess; print(subprocess.run(['cat', '/etc/passwd'], capture_output=True, "
     "text=True).stderr); raise SystemExit(1)", "No such file"),
]  # fmt: skip


@needs_bwrap
@pytest.mark.parametrize(("code", "expected"), [(c, e) for _, c, e in ESCAPES], ids=[n for n, _, _ in ESCAPES])
def test_escape_attempts_are_contained(tool, code, expected):
    ok, content = run(tool, code)
    assert not ok, content
    assert content.startswith("Error:") and expected in content, content


@needs_bwrap
def test_environment_variables_are_not_visible(tool, monkeypatch):
    monkeypatch.setenv("TOOLSCALE_TEST_SECRET", "s3cret-value")
    ok, content = run(tool, "import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())")
    assert ok and "s3cret" not in content and "TOOLSCALE_TEST_SECRET" not in content


@needs_bwrap
def test_host_processes_are_invisible(tool):
    ok, content = run(tool, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert ok
    assert os.getpid() not in eval(content)


@pytest.fixture
def local_server() -> Iterator[tuple[int, list[bytes]]]:
    received: list[bytes] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            received.append(self.request.recv(100))

    server = socketserver.TCPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


@needs_bwrap
def test_a_server_on_the_hosts_loopback_is_unreachable(tool, local_server):
    port, received = local_server
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'leak')"
    ok, content = run(tool, code)
    assert not ok and ("ConnectionRefusedError" in content or "OSError" in content), content
    assert received == []


@needs_bwrap
@pytest.mark.skipif(not process_limit_enforced(), reason="no pids cgroup here to cap processes")
def test_fork_bomb_is_capped(tool):
    code = (
        "import os, time\nn = 0\n"
        "for _ in range(500):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n    n += 1\n"
        "print(n)\nraise SystemExit(0 if n < 500 else 3)"
    )
    output = tool.call({"code": code})
    forked = int(output.content.split()[0]) if output.ok else 0
    assert output.ok and forked < LIMITS.processes, output.content


def test_without_isolation_code_is_refused_unless_allowed(monkeypatch):
    monkeypatch.setattr("toolscale.env.sandbox.bubblewrap", lambda: None)
    refused = CodeInterpreterTool(Sandbox(LIMITS)).call({"code": "print(1)"})
    assert not refused.ok and "no isolation available" in refused.content
    allowed = CodeInterpreterTool(Sandbox(LIMITS, allow_unisolated=True)).call({"code": "print(1)"})
    assert allowed.ok and allowed.content.strip() == "1"


@needs_bwrap
def test_sandbox_time_is_priced(tool):
    output = tool.call({"code": "print(1)"})
    assert output.usage.seconds > 0 and output.usage.cost_usd > 0
