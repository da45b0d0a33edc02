"""The paper's retrieval protocols (`--search-protocol frames|hle`) and web search (`--web-search`)
through real HTTP servers: a model endpoint that records the tools it is offered, and a search API
that answers as Tavily's does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from toolscale.cli import app
from toolscale.models.testserver import OpenAICompatibleServer, tool_call
from toolscale.qa.corpus import Hit
from toolscale.qa.protocol import PROTOCOLS, SearchProtocol, shown_passages
from toolscale.store import Store

FIXTURES = Path(__file__).parents[1] / "fixtures" / "qa"


def invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


class SearchApi(BaseHTTPRequestHandler):
    """Tavily's shape: POST {"query", "max_results"} with a bearer key; {"results": [{title, content, url}]}."""

    seen: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"body": body, "auth": self.headers.get("Authorization")})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            return
        results = [{"title": f"Page {n} on {body['query'][:20]}", "content": f"Snippet {n}: the answer is C.",
                    "url": f"https://example.org/{n}"} for n in range(min(3, body.get("max_results", 3)))]  # fmt: skip
        data = json.dumps({"results": results}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def search_api() -> Iterator[str]:
    SearchApi.seen, SearchApi.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearchApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search"
    server.shutdown()


def web_config(folder: Path, url: str) -> Path:
    path = folder / "web.toml"
    path.write_text(f'[web_search]\nurl = "{url}"\nmethod = "POST"\nquery_field = "query"\n'
                    'count_field = "max_results"\napi_key_env = "TEST_SEARCH_KEY"\nresults = "results"\n'
                    'title = "title"\nsnippet = "content"\nlink = "url"\nprice_per_call = 0.01\n')  # fmt: skip
    return path


def test_a_protocol_shows_unseen_passages_cut_and_best_first_within_its_tokens() -> None:
    hits = [Hit(f"d{n}#0", f"d{n}", f"T{n}", "word " * 400, 1.0 - n / 10) for n in range(6)]
    frames = PROTOCOLS["frames"]
    shown = shown_passages(hits, {"d1#0"}, frames)
    assert [h["id"] for h in shown] == ["d0#0", "d2#0", "d3#0", "d4#0", "d5#0"]  # d1 was shown before
    tight = SearchProtocol("t", k=6, passage_chars=100, block_tokens=80)  # ~320 characters: two passages
    assert [h["id"] for h in shown_passages(hits, set(), tight)] == ["d0#0", "d1#0"]
    assert all(len(h["text"]) == 100 for h in shown_passages(hits, set(), tight))


def searching_twice(request: dict[str, Any]) -> dict[str, Any]:
    """Searches, searches again if it may, then answers; records the tools each turn offered."""
    searching_twice.offered.append([t["function"]["name"] for t in request.get("tools") or []])  # type: ignore[attr-defined]
    results = [m for m in request["messages"] if m["role"] == "tool"]
    if len(results) < 2 and "search" in searching_twice.offered[-1]:  # type: ignore[attr-defined]
        return tool_call("search", {"query": "Danube river capitals" if not results else "Vienna"})
    return tool_call("answer", {"answer": "Germany, 4"})


def test_frames_protocol_retrieves_150_and_withdraws_search_once_documents_exist(tmp_path: Path) -> None:
    store = str(tmp_path / "s.duckdb")
    invoke("corpus", "build", str(FIXTURES / "wiki_pages"), "--name", "wikipedia", "--store", store)
    invoke("import", "qa", str(FIXTURES / "frames.tsv"), "--format", "frames", "--store", store)
    searching_twice.offered = []  # type: ignore[attr-defined]
    with OpenAICompatibleServer(searching_twice) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--limit", "1", "--search-protocol", "frames",
               "--judge", "none", "--models", str(registry), "--store", store)  # fmt: skip
        first = server.log.requests[0]
    search = next(t for t in first["tools"] if t["function"]["name"] == "search")
    assert "best 150 passages" in search["function"]["description"]
    assert searching_twice.offered[:2] == [["search", "answer"], ["answer"]]  # type: ignore[attr-defined]
    with Store(store, read_only=True) as opened:
        (row,) = opened.query("SELECT policy, transcript FROM episodes")
    assert "@" in row["policy"]  # another setup than the default protocol's
    shown = json.loads(next(m for m in json.loads(row["transcript"]) if m["role"] == "tool")["content"])
    assert 1 < len(shown) <= 150 and all(len(h["text"]) <= 4_000 for h in shown)


def hle_reader(request: dict[str, Any]) -> dict[str, Any]:
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if not results:
        return tool_call("search", {"query": "the answer to this question"})
    return tool_call("answer", {"answer": "C" if "answer is C" in results[0] else "A"})


def test_closed_book_questions_search_the_web_when_a_run_configures_it(
    tmp_path: Path, search_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "s.duckdb")
    invoke("import", "qa", str(FIXTURES / "hle.jsonl"), "--format", "hle", "--store", store)
    config = web_config(tmp_path, search_api)
    monkeypatch.setenv("TEST_SEARCH_KEY", "k-123")
    with OpenAICompatibleServer(hle_reader) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--search-protocol", "hle", "--web-search",
               str(config), "--judge", "none", "--models", str(registry), "--store", store)  # fmt: skip
    assert SearchApi.seen and SearchApi.seen[0]["auth"] == "Bearer k-123"
    assert SearchApi.seen[0]["body"] == {"query": "the answer to this question", "max_results": 50}
    with Store(store, read_only=True) as opened:
        rows = opened.query("SELECT transcript, cost_usd, usage FROM episodes")
    assert len(rows) == 4
    for row in rows:
        shown = json.loads(next(m for m in json.loads(row["transcript"]) if m["role"] == "tool")["content"])
        assert shown[0]["url"] == "https://example.org/0" and shown[0]["text"] == "Snippet 0: the answer is C."
        assert json.loads(row["usage"])["tools"]["cost_usd"] == pytest.approx(0.01)  # the call's price


def test_a_failing_search_api_is_said_in_the_result_and_a_bad_config_is_one_line(
    tmp_path: Path, search_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "s.duckdb")
    invoke("import", "qa", str(FIXTURES / "hle.jsonl"), "--format", "hle", "--store", store)
    monkeypatch.setenv("TEST_SEARCH_KEY", "k-123")
    SearchApi.status = 503
    with OpenAICompatibleServer(hle_reader) as server:
        registry = tmp_path / "models.toml"
        registry.write_text(f'[models.reader]\nbase_url = "{server.base_url}"\nmodel = "gpt-5-mini"\n')
        config = str(web_config(tmp_path, search_api))
        invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--limit", "1", "--web-search", config, "--judge",
               "none", "--models", str(registry), "--store", store)  # fmt: skip
    with Store(store, read_only=True) as opened:
        (row,) = opened.query("SELECT transcript FROM episodes")
    result = next(m for m in json.loads(row["transcript"]) if m["role"] == "tool")["content"]
    assert "web search failed: the search API answered HTTP 503" in result
    bad = tmp_path / "bad.toml"
    bad.write_text('[web_search]\nurl = "ftp://x"\n')
    refused = invoke("eval", "run", "-p", "oracle", "-d", "qa", "--web-search", str(bad), "--store", store, code=1)
    assert "[web_search] url" in refused.output and len(refused.output.strip().splitlines()) == 1
    monkeypatch.delenv("TEST_SEARCH_KEY")
    unset = invoke("eval", "run", "-p", "model:reader", "-d", "qa", "--web-search", config, "--models",
                   str(registry), "--store", store, code=1)  # fmt: skip
    assert "set TEST_SEARCH_KEY" in unset.output


def test_a_passage_without_spaces_is_shown_cut_not_whole(tmp_path: Path) -> None:
    """Issue 50 §5: a whitespace-free document is one passage of any length; 20 of them went into
    the agent's context whole (1.9M characters each)."""
    from toolscale.qa.building import save_corpus
    from toolscale.qa.corpus import Document, open_index
    from toolscale.qa.search_tool import SearchTool

    blob = "QUJD" * 500_000  # 2M characters, no space
    with Store(tmp_path / "s.duckdb") as store:
        save_corpus(
            store, "blobs", [Document("blob", "Blob QUJD", blob), Document("page", "Page", "A page.")], "t", "r"
        )
        out = SearchTool(open_index(store, "blobs")).call({"query": "Blob QUJD", "k": 20})
    shown = json.loads(out.content)
    assert shown[0]["doc"] == "blob" and len(shown[0]["text"]) == 4_000 and len(out.content) < 10_000
