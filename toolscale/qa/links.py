"""Links compared as links (issue 49 §3). FRAMES names a question's supporting pages by URL, written
as people copy them: percent-encoded (`Z%C3%BCrich`), with a `#section`, from the mobile site
(`en.m.wikipedia.org`), over `http:`, with a trailing slash, with spaces or underscores. A page
is the same page in every one of these, so each is reduced to one key before comparing: for a
Wikipedia page its language and title as MediaWiki stores it (underscores, the first letter upper
case), for any other URL its host and path; a bare title (a document's, or a redirect given as an
alias) compares with Wikipedia pages of any language by title."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

HOST_FIRST = re.compile(r"^(?:[a-z0-9-]+\.)+[a-z]{2,}/", re.IGNORECASE)  # "en.wikipedia.org/wiki/…"
WIKIPEDIA_HOST = re.compile(r"^(?:(?P<lang>[a-z][a-z0-9-]*)\.)?(?:m\.)?wikipedia\.org$")


def title_key(title: str) -> str:
    """A Wikipedia title as MediaWiki normalizes it: spaces as underscores, runs collapsed, the
    first letter upper case (titles differ only after it)."""
    text = re.sub(r"[\s_]+", "_", unquote(title).strip()).strip("_")
    return text[:1].upper() + text[1:]


def link_key(link: str) -> str:
    """The key a link or title compares by: `wiki:Title` for a Wikipedia page (any language, any
    host form), `host/path` for another URL, `wiki:Title` for a bare title."""
    text = link.strip()
    if not re.match(r"^[a-z][a-z0-9+.-]*://", text, re.IGNORECASE) and not HOST_FIRST.match(text):
        return "wiki:" + title_key(text) if text else ""
    parts = urlsplit(text if "://" in text else f"https://{text}")
    host = (parts.hostname or "").lower().removeprefix("www.")
    path = unquote(parts.path)
    if WIKIPEDIA_HOST.match(host):
        if path.startswith("/wiki/"):
            return "wiki:" + title_key(path.removeprefix("/wiki/").rstrip("/"))
        title = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("title")
        if title:  # /w/index.php?title=Zürich
            return "wiki:" + title_key(title)
    return f"{host}{path.rstrip('/')}"


def link_keys(links: Iterable[str]) -> set[str]:
    return {key for link in links if (key := link_key(link))}


def found_share(wanted: Iterable[str], found: Iterable[str]) -> tuple[int, int]:
    """(how many of the `wanted` pages are among `found`, how many are wanted), by key."""
    wanted_keys, found_keys = link_keys(wanted), link_keys(found)
    return len(wanted_keys & found_keys), len(wanted_keys)


def pages_held(store: Any, corpus: str, supporting: list[tuple[str, ...]]) -> list[bool]:
    """Per question (its supporting links or ids), whether every one of its pages is a document of
    `corpus` — by id, by URL or by title, compared as keys. Only the documents that could match are
    read: a corpus of millions stays on disk."""
    wanted = {key for links in supporting for key in link_keys(links)}
    if not wanted:
        return [True] * len(supporting)
    titles = sorted({key.removeprefix("wiki:").replace("_", " ").lower() for key in wanted if key.startswith("wiki:")})
    raw = sorted({link for links in supporting for link in links})
    rows = store.query(
        "SELECT doc_id, title, url FROM documents WHERE corpus = ? AND (list_contains(?, lower(title)) "
        "OR list_contains(?, doc_id) OR list_contains(?, url))",
        [corpus, titles, raw, raw],
    )
    held = link_keys(value for row in rows for value in (row["doc_id"], row["title"], row["url"]) if value)
    return [link_keys(links) <= held for links in supporting]
