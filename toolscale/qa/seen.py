"""What a simulated expert is shown, parsed as a reader would parse it: the question (the user's
message), the pages of the passages that searches returned (the facts of their infoboxes and the
rows of their tables), the output of the programs that ran, and the queries already written.
Built from the rendered messages alone, the way a real model gets them: nothing here reads a
`Question`, so no gold answer, chain or supporting list can reach a simulated expert.

Passages are ~120 words (qa/corpus.py): an infobox's lines arrive flattened into one line
(`- Seller: Granite Peak Goods - Category: toys`), a table arrives in pieces, each under its
heading and header (a corpus built before index version 3 put the heading at the end of the
passage before the table: it is read from there when that passage was seen). A reader that did
not get a piece of a table does not know its rows."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

LABEL = r"[A-Z0-9][^:|\n]{0,60}?"
FACT = re.compile(rf"(?:^|\s)- (?P<label>{LABEL}): (?P<value>.*?)(?=\s- {LABEL}: |\s##\s|$)", re.DOTALL)
HEADING = re.compile(r"##\s+([^\n#|]+?)\s*$")
TABLE_HEADING = re.compile(r"^#+\s+([^\n#|]+?)\s*\n\s*\|", re.MULTILINE)  # a heading just above a table
PROGRAM_TOOLS = ("enhance_reasoning", "code_interpreter")


@dataclass
class SeenTable:
    heading: str | None  # "Games (home team)", when the passage before its first piece was seen
    header: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def column(self, name: str) -> int | None:
        wanted = name.lower()
        return next((i for i, label in enumerate(self.header) if label.lower() == wanted), None)


@dataclass
class SeenPage:
    doc: str
    title: str
    facts: dict[str, str] = field(default_factory=dict)  # label → value, as printed
    tables: list[SeenTable] = field(default_factory=list)

    def fact(self, label: str) -> str | None:
        wanted = label.lower()
        return next((value for name, value in self.facts.items() if name.lower() == wanted), None)


@dataclass
class Seen:
    question: str
    pages: dict[str, SeenPage] = field(default_factory=dict)  # by document id, in the order found
    outputs: list[str] = field(default_factory=list)  # what programs printed, oldest first
    queries: list[str] = field(default_factory=list)  # queries written so far

    def titled(self, title: str) -> SeenPage | None:
        return next((page for page in self.pages.values() if page.title == title), None)


def seen(messages: list[dict[str, Any]], reads: int | None = None) -> Seen:
    """What the messages show an expert that reads the last `reads` tool results (all: None)."""
    question = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    results = [m for m in messages if m.get("role") == "tool"]
    results = results[-reads:] if reads else results
    shown = Seen(question.strip())
    passages: dict[str, dict[str, Any]] = {}
    for message in results:
        name, content = message.get("name"), str(message.get("content") or "")
        if name == "search":
            query, hits = _search_result(content)
            shown.queries += [query] if query else []
            for hit in hits:
                passages.setdefault(str(hit.get("id") or hit.get("doc")), hit)
        elif name in PROGRAM_TOOLS:
            printed = program_output(content)
            shown.outputs += [printed] if printed else []
    for passage_id in sorted(passages, key=_passage_order):
        _read_passage(shown, passages[passage_id], passages)
    return shown


def program_output(content: str) -> str | None:
    """The last line a program printed: after `Output:` in the paper form, the whole result in
    the plain one; None for an error."""
    text = content.rsplit("Output:\n", 1)[1] if "Output:\n" in content else content
    if text.startswith("Error") or "Traceback" in text:
        return None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def _search_result(content: str) -> tuple[str | None, list[dict[str, Any]]]:
    try:
        found = json.loads(content)
    except json.JSONDecodeError:
        return None, []
    query = found.get("query") if isinstance(found, dict) else None
    hits = found.get("passages") if isinstance(found, dict) else found
    hits = [h for h in hits if isinstance(h, dict) and isinstance(h.get("text"), str)] if isinstance(hits, list) else []
    return (str(query) if query else None), hits


def _passage_order(passage_id: str) -> tuple[str, int]:
    doc, _, number = passage_id.rpartition("#")
    return (doc, int(number)) if number.isdigit() else (passage_id, 0)


def _read_passage(shown: Seen, hit: dict[str, Any], passages: dict[str, dict[str, Any]]) -> None:
    doc = str(hit.get("doc") or hit.get("id") or "")
    page = shown.pages.setdefault(doc, SeenPage(doc, str(hit.get("title") or "")))
    text = str(hit["text"])
    lines = [line for line in text.splitlines() if line.strip().startswith("|")]
    prose = "\n".join(line for line in text.splitlines() if not line.strip().startswith("|"))
    for match in FACT.finditer(prose):
        page.facts.setdefault(match["label"].strip(), match["value"].strip())
    if len(lines) >= 2:
        above = TABLE_HEADING.search(text)
        _read_table(page, lines, above.group(1) if above else _heading_before(hit, passages, page))


def _heading_before(hit: dict[str, Any], passages: dict[str, dict[str, Any]], page: SeenPage) -> str | None:
    """The `## heading` that ends the passage before this one, when that passage was seen."""
    doc, _, number = str(hit.get("id") or "").rpartition("#")
    before = passages.get(f"{doc}#{int(number) - 1}") if number.isdigit() else None
    if before is None:
        return None
    text = str(before["text"]).rstrip()
    heading = HEADING.search(text.splitlines()[-1]) if text else None
    if heading:
        return heading.group(1)
    earlier = next((t for t in page.tables if t.rows and _same_piece(t, before)), None)
    return earlier.heading if earlier else None


def _same_piece(table: SeenTable, passage: dict[str, Any]) -> bool:
    lines = [line for line in str(passage["text"]).splitlines() if line.strip().startswith("|")]
    return bool(lines) and _cells(lines[0]) == table.header


def _read_table(page: SeenPage, lines: list[str], heading: str | None) -> None:
    header = _cells(lines[0])
    rows = [_cells(line) for line in lines[2:]]
    same = next((t for t in page.tables if t.header == header and (t.heading == heading or heading is None
                                                                   or t.heading is None)), None)  # fmt: skip
    if same is None:
        page.tables.append(SeenTable(heading, header, rows))
        return
    same.heading = same.heading or heading
    same.rows += rows


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
