"""Web search for questions asked of the open web (HLE's setting): any HTTP search API a user
configures in a TOML file — where to send the query, where the results are in the reply and what
their fields are called, and what a call costs — so Tavily, Brave, SearXNG or a company's own
service plug in without code.

    [web_search]
    url = "https://api.tavily.com/search"
    method = "POST"              # the query goes in a JSON body; GET: in the URL's query string
    query_field = "query"
    count_field = "max_results"  # optional: how many results to ask for
    api_key_env = "TAVILY_API_KEY"
    auth = "bearer"              # or "header:X-Subscription-Token", or "query:key"
    results = "results"          # where the list is in the reply (dotted: "web.results")
    title = "title"
    snippet = "content"
    link = "url"
    price_per_call = 0.008
    timeout_s = 20

A reply is read under a deadline and a size cap, redirects are refused (the key goes only where
the file says), and a reply that is not JSON of that shape is the call's error, not the run's."""

from __future__ import annotations

import json
import os
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolscale.errors import ToolscaleError
from toolscale.qa.corpus import Hit

MAX_SNIPPET_CHARS = 4_000


class WebSearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https?://")
    method: Literal["GET", "POST"] = "GET"
    query_field: str = "q"
    count_field: str | None = None
    api_key_env: str | None = None
    auth: str = "bearer"  # bearer | header:NAME | query:NAME
    results: str = "results"
    title: str = "title"
    snippet: str = "snippet"
    link: str = "url"
    price_per_call: float = Field(0.0, ge=0)
    timeout_s: float = Field(20.0, gt=0, le=300)
    max_reply_bytes: int = Field(4 * 2**20, ge=1024)


def load_web_search(path: str | Path) -> WebSearchConfig:
    try:
        raw = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ToolscaleError(f"{path}: cannot read the web search config ({exc})") from None
    if not isinstance(raw.get("web_search"), dict):
        raise ToolscaleError(f"{path}: no [web_search] table (url, query_field, results, ...)")
    try:
        return WebSearchConfig(**raw["web_search"])
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise ToolscaleError(f"{path}: [web_search] {where}: {problem['msg']}") from None


class WebSearchError(Exception):
    """A call that failed: said in the tool's result, not raised through the episode."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        raise WebSearchError("the search API answered with a redirect; put the final URL in the config")


class WebSearch:
    """One configured search API: `search(query, k)` gives hits (title, snippet as text, URL)."""

    described = "a web search engine"

    def __init__(self, config: WebSearchConfig) -> None:
        self.config = config
        self.key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        if config.api_key_env and not self.key:
            raise ToolscaleError(f"web search: set {config.api_key_env} (the config's api_key_env)")
        self.opener = urllib.request.build_opener(_NoRedirects)

    def search(self, query: str, k: int) -> list[Hit]:
        raw = self._fetch(self._request(query, k))
        try:
            reply = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise WebSearchError("the search API's reply is not JSON") from None
        items = _at(reply, self.config.results)
        if not isinstance(items, list):
            raise WebSearchError(f"the search API's reply has no list at `{self.config.results}`")
        hits = []
        for rank, item in enumerate(i for i in items if isinstance(i, dict)):
            link, title = _text(item.get(self.config.link)), _text(item.get(self.config.title))
            snippet = _text(item.get(self.config.snippet))[:MAX_SNIPPET_CHARS]
            if link or snippet:
                hits.append(Hit(f"web:{rank}", link, title, snippet, float(-rank), link))
        return hits[:k]

    def _request(self, query: str, k: int) -> urllib.request.Request:
        config = self.config
        fields: dict[str, Any] = {config.query_field: query} | ({config.count_field: k} if config.count_field else {})
        headers = {"Accept": "application/json"}
        kind, _, name = config.auth.partition(":")
        if self.key and kind == "bearer":
            headers["Authorization"] = f"Bearer {self.key}"
        elif self.key and kind == "header":
            headers[name] = self.key
        elif self.key and kind == "query":
            fields[name] = self.key
        if config.method == "POST":
            body = json.dumps({k: v for k, v in fields.items() if kind != "query" or k != name}).encode()
            url = config.url if kind != "query" else _with_query(config.url, {name: self.key})
            return urllib.request.Request(url, body, headers | {"Content-Type": "application/json"}, method="POST")
        return urllib.request.Request(_with_query(config.url, fields), None, headers, method="GET")

    def _fetch(self, request: urllib.request.Request) -> bytes:
        """The reply's body, read under the config's deadline (however slowly it trickles) and cap."""
        deadline = time.monotonic() + self.config.timeout_s
        try:
            with self.opener.open(request, timeout=self.config.timeout_s) as reply:
                chunks, size = [], 0
                while chunk := reply.read(65_536):
                    size += len(chunk)
                    if size > self.config.max_reply_bytes:
                        raise WebSearchError(f"the search API's reply passed {self.config.max_reply_bytes} bytes")
                    if time.monotonic() > deadline:
                        raise WebSearchError(f"the search API took over {self.config.timeout_s:g} s")
                    chunks.append(chunk)
                return b"".join(chunks)
        except urllib.error.HTTPError as exc:
            raise WebSearchError(f"the search API answered HTTP {exc.code}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WebSearchError(f"the search API cannot be reached ({reason})") from None


def _with_query(url: str, fields: dict[str, Any]) -> str:
    joiner = "&" if urllib.parse.urlsplit(url).query else "?"
    return f"{url}{joiner}{urllib.parse.urlencode(fields)}"


def _at(value: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _text(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""
