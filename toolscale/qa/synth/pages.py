"""One page per subject record, written as an encyclopedia page: a title, a line saying what it
is, an infobox of its fields (`- Label: value`), and a table per child (a hotel's room types).
A page names the other pages it refers to by their titles: facts spread over pages, and a
question can need several of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolscale.domain.database import Database
from toolscale.domain.phrases import plural_noun, said_as_words, upper_first
from toolscale.domain.spec import DomainSpec
from toolscale.qa.corpus import Document
from toolscale.qa.synth.subjects import Child, Subject, field_words, personal

MAX_COLUMNS = 7
SHOWN_TYPES = ("str", "int", "float", "bool", "date", "enum", "ref")


def show(value: Any) -> str | None:
    """A value as a page prints it: money and ratings to at most two decimals, dates as ISO
    dates, yes/no, codes as words; None where a page shows nothing."""
    if value is None or isinstance(value, list | dict):
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return said_as_words(value) if isinstance(value, str) else str(value)


@dataclass
class Table:
    heading: str
    child: Child
    columns: list[str]  # labels
    rows: list[dict[str, str]]  # label → cell
    records: list[dict[str, Any]]


@dataclass
class Page:
    domain: str
    subject: Subject
    record: dict[str, Any]
    title: str
    doc_id: str
    facts: dict[str, str] = field(default_factory=dict)  # label → value as printed
    fields: dict[str, str] = field(default_factory=dict)  # label → field name
    tables: list[Table] = field(default_factory=list)
    text: str = ""

    def document(self) -> Document:
        return Document(self.doc_id, self.title, self.text)


class PageWriter:
    def __init__(self, domain: str, spec: DomainSpec, db: Database, subjects: dict[str, Subject]) -> None:
        self.domain, self.spec, self.db, self.subjects = domain, spec, db, subjects

    def pages(self) -> list[Page]:
        return [
            self.page(subject, record) for subject in self.subjects.values() for record in self.db.rows(subject.table)
        ]

    def page(self, subject: Subject, record: dict[str, Any]) -> Page:
        key = record[self.spec.tables[subject.table].key]
        page = Page(self.domain, subject, record, subject.title(record), f"{self.domain}/{subject.table}/{key}")
        for name in self.spec.tables[subject.table].fields:
            label, value = self._fact(subject.table, name, record, skip=subject.title_fields)
            if value is not None:
                page.facts[label], page.fields[label] = value, name
        page.tables = [self._table(subject, child, key) for child in subject.children]
        page.tables = [t for t in page.tables if t.rows]
        page.text = self._text(page)
        return page

    def _fact(self, table: str, name: str, record: dict[str, Any], skip: tuple[str, ...]) -> tuple[str, str | None]:
        fspec = self.spec.tables[table].fields[name]
        if name in skip or name == self.spec.tables[table].key or personal(name):
            return "", None
        if fspec.type not in SHOWN_TYPES:
            return "", None
        label = upper_first(field_words(self.spec, table, name))
        if fspec.type == "ref":
            target = self.subjects.get(fspec.table or "")
            row = self.db.get(fspec.table or "", record.get(name)) if target and record.get(name) else None
            return label, target.title(row) if target and row else None
        return label, show(record.get(name))

    def _table(self, subject: Subject, child: Child, key: str) -> Table:
        heading = upper_first(plural_noun(child.noun))
        if sum(c.table == child.table for c in subject.children) > 1:
            heading += f" ({field_words(self.spec, child.table, child.ref)})"
        own = self.subjects.get(child.table)
        table = Table(heading, child, [], [], [])
        for record in self.db.lookup(child.table, child.ref, key):
            row = {upper_first(child.noun): own.title(record)} if own else {}
            for name in self.spec.tables[child.table].fields:
                label, value = self._fact(
                    child.table, name, record, skip=(child.ref, *(own.title_fields if own else ()))
                )
                if value is not None:
                    row[label] = value
            table.rows.append(row)
            table.records.append(record)
        table.columns = list(dict.fromkeys(label for row in table.rows for label in row))[:MAX_COLUMNS]
        table.rows = [{c: row[c] for c in table.columns if c in row} for row in table.rows]  # what the page shows
        return table

    def _text(self, page: Page) -> str:
        what = f"{page.title} is one of the {plural_noun(page.subject.noun)} of the {self.domain} catalog."
        parts = [f"# {page.title}", what, "\n".join(f"- {label}: {value}" for label, value in page.facts.items())]
        for table in page.tables:
            lines = ["| " + " | ".join(table.columns) + " |", "|" + " --- |" * len(table.columns)]
            lines += ["| " + " | ".join(row.get(c, "") for c in table.columns) + " |" for row in table.rows]
            parts += [f"## {table.heading}", "\n".join(lines)]
        return "\n\n".join(p for p in parts if p)
