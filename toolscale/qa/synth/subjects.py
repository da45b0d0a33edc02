"""What in a domain gets a page. A **subject** table is one of the service's catalog (hotels,
teams, courses), not its customers: no email field, and each record named by a title unique in the
table (`name`, `title`, a `*_name` field, a `city`, or first and last name together). Its page lists
the rows of **child** tables that refer to it (a hotel's room types, a team's games), when those
rows are catalog too (they refer to no customer) and few enough to read as a table."""

from __future__ import annotations

from dataclasses import dataclass

from toolscale.domain.database import Database
from toolscale.domain.spec import DomainSpec, FieldSpec
from toolscale.synth.scenario import singular, words

TITLE_FIELDS = ("name", "title")  # in this order, then a `*_name` field, then `city`, then first + last name
MAX_CHILD_ROWS = 30  # more rows than this under one record: the table is a log, not part of a page
PERSONAL_WORDS = ("email", "phone", "birth", "imei", "passport")  # never printed on a page


def personal(field: str) -> bool:
    return any(word in field for word in PERSONAL_WORDS)


@dataclass(frozen=True)
class Child:
    table: str
    ref: str  # the child's field that refers to the subject
    noun: str  # singular, in words: "room type"


@dataclass(frozen=True)
class Subject:
    table: str
    noun: str
    title_fields: tuple[str, ...]
    children: tuple[Child, ...] = ()

    def title(self, record: dict[str, object]) -> str:
        return " ".join(str(record[f]) for f in self.title_fields)


def field_words(spec: DomainSpec, table: str, field: str) -> str:
    """How a page names a field: its spec `label`, else its name as words ("guest_rating" →
    "guest rating"); a reference without its `_id` ("meeting_hotel_id" → "meeting hotel")."""
    found = spec.tables[table].fields[field]
    if found.label:
        return found.label
    return words(field.removesuffix("_id")) if found.type == "ref" else words(field)


def people_tables(spec: DomainSpec) -> set[str]:
    """Customers and what belongs to them: tables with an email field, and every table that refers
    to one of those, directly or through others (an order's lines)."""
    people = {name for name, table in spec.tables.items() if "email" in table.fields}
    grown = True
    while grown:
        more = {name for name, table in spec.tables.items() if name not in people and _refers_to(table.fields, people)}
        people |= more
        grown = bool(more)
    return people


def title_fields(spec: DomainSpec, table: str, db: Database) -> tuple[str, ...] | None:
    fields = spec.tables[table].fields
    rows = list(db.rows(table))
    named = [f for f in fields if f.endswith("_name") and f not in ("first_name", "last_name")]
    options = [(f,) for f in (*TITLE_FIELDS, *named, "city") if f in fields]
    options += [("first_name", "last_name")] if {"first_name", "last_name"} <= set(fields) else []
    for option in options:
        if all(fields[f].type in ("str", "enum") for f in option) and _unique(rows, option):
            return option
    return None


def _unique(rows: list[dict[str, object]], option: tuple[str, ...]) -> bool:
    titles = [" ".join(str(r.get(f)) for f in option) for r in rows]
    return bool(rows) and all(t.strip() and "None" not in t for t in titles) and len(set(titles)) == len(titles)


def find_subjects(spec: DomainSpec, db: Database) -> dict[str, Subject]:
    people = people_tables(spec)
    subjects: dict[str, Subject] = {}
    for table in spec.tables:
        titles = title_fields(spec, table, db) if table not in people else None
        if titles is not None:
            subjects[table] = Subject(table, singular(table), titles)
    return {name: _with_children(spec, db, subject, people) for name, subject in subjects.items()}


def _with_children(spec: DomainSpec, db: Database, subject: Subject, people: set[str]) -> Subject:
    children = []
    for table, tspec in spec.tables.items():
        if table == subject.table or table in people:
            continue
        for field, fspec in tspec.fields.items():
            if fspec.type == "ref" and fspec.table == subject.table and _few(db, table, field):
                children.append(Child(table, field, singular(table)))
    return Subject(subject.table, subject.noun, subject.title_fields, tuple(children))


def _refers_to(fields: dict[str, FieldSpec], tables: set[str]) -> bool:
    return any(f.type == "ref" and f.table in tables for f in fields.values())


def _few(db: Database, table: str, field: str) -> bool:
    counts: dict[object, int] = {}
    for row in db.rows(table):
        if row.get(field) is not None:  # a free agent is on no team's roster
            counts[row.get(field)] = counts.get(row.get(field), 0) + 1
    return bool(counts) and max(counts.values()) <= MAX_CHILD_ROWS
