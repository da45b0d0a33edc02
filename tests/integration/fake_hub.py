"""A local HTTP server speaking the part of the Hugging Face Hub API that `HfApi.upload_folder`
uses (create a repo, list its files, pre-upload, commit), holding one dataset repo in memory. Every
file is asked to be sent inline ("regular" upload mode), so no LFS or Xet storage is involved."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeHub:
    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files: dict[str, bytes] = dict(files or {})  # the repo's files, path → content
        self.commits: list[dict[str, Any]] = []
        self.unknown: list[str] = []  # requests this fake does not answer
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def _send(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:
                if self.path.startswith("/api/agent-harnesses"):
                    self._send({"standardEnvVars": [], "harnesses": {}})
                elif "/tree/" in self.path:
                    self._send([{"type": "file", "path": p, "size": len(c), "oid": "0" * 40} for p, c in
                                sorted(hub.files.items())])  # fmt: skip
                elif "/revision/" in self.path or self.path.startswith("/api/datasets/"):
                    self._send({"id": "someone/tasks", "sha": "0" * 40, "siblings": []})
                else:
                    hub.unknown.append(f"GET {self.path}")
                    self._send({"error": f"not faked: GET {self.path}"}, 404)

            def do_POST(self) -> None:
                body = self._body()
                if self.path == "/api/validate-yaml":  # the card's header: accepted
                    self._send({"errors": [], "warnings": []})
                elif self.path == "/api/repos/create":
                    self._send({"url": f"{hub.url}/datasets/someone/tasks", "name": "someone/tasks"})
                elif "/preupload/" in self.path:
                    files = json.loads(body)["files"]
                    self._send({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                          for f in files]})  # fmt: skip
                elif "/commit/" in self.path:
                    hub.commit([json.loads(line) for line in body.decode().splitlines() if line.strip()])
                    oid = "1" * 40
                    url = f"{hub.url}/datasets/someone/tasks/commit/{oid}"
                    self._send({"commitUrl": url, "commitOid": oid, "pullRequestUrl": None})
                else:
                    hub.unknown.append(f"POST {self.path}")
                    self._send({"error": f"not faked: POST {self.path}"}, 404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def commit(self, operations: list[dict[str, Any]]) -> None:
        self.commits.append({"operations": operations})
        for op in operations:
            value = op.get("value", {})
            if op["key"] == "file":
                self.files[value["path"]] = base64.b64decode(value["content"])
            elif op["key"] == "deletedFile":
                self.files.pop(value["path"], None)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
