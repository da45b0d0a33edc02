"""How the user singles out the record they mean among the ones an output lists: by fields no other
listed record shares, in the domain's words ("my checking account opened on 2019-04-02"), stated as
facts; and which field of a record a question asks about."""

from __future__ import annotations

from typing import Any

from toolscale.domain.database import Record
from toolscale.matching import trivially_said
from toolscale.synth.builder.core import BuilderCore, NoTaskError
from toolscale.synth.builder.phrasing import MEANT, named_by_customer, named_in_brief
from toolscale.synth.descriptions import attribute_phrase, from_templates, singles_out
from toolscale.synth.graph import field_label
from toolscale.synth.provenance import flat_fields, get_path
from toolscale.synth.scenario import Request, say, singular, words

SELECTOR_TYPES = {"enum": 0, "str": 1, "date": 2, "int": 3, "float": 4}


class Describing(BuilderCore):
    """How the user singles a record out among the listed ones, and what a question asks about."""

    def describe(
        self, table: str, chosen: Record, rows: list[Record], role: str, request: Request, output: int | None = None
    ) -> dict[str, Any]:
        """How the user tells `chosen` apart from the other listed rows (which gold action `output`
        shows): `{"select": ...}` by its attributes. A family may tell it otherwise: `computed`, by
        comparing (`{"pick": ...}`); `disambiguation`, only when the agent asks."""
        return {"select": self.select(table, chosen, rows, role, request)}

    def select(self, table: str, chosen: Record, rows: list[Record], role: str, request: Request) -> dict[str, str]:
        """Fields of `chosen` that, together, no other listed row shares, said by the user as the
        domain names such a record ("my card ending in 4821": one of the table's `describe`
        phrases), else as one or two attributes ("the pending order placed on 2026-05-17"), with
        the role of the record where the tool takes two ("The account it comes from is ..."); the
        slots they are stored in. None single it out: the user cannot say which one they mean."""
        owned = self._owns(table, chosen)
        tspec = self.domain.spec.tables.get(table)
        found = from_templates(tspec, chosen, rows, set(self.unsaid), owned) if tspec is not None else None
        if found is not None:
            attrs, named, named_mine = list(found.fields), found.brief, found.mine
        else:
            attrs = self._distinguishing(table, chosen, rows)
            if attrs is None:
                raise NoTaskError("ambiguous_target", f"no attributes single out one {singular(table)} of {len(rows)}")
            parts = [(self._field_words(table, a), get_path(chosen, a), self._field_type(table, a)) for a in attrs]
            named = attribute_phrase(singular(table), parts, "your" if owned else "the")
            named_mine = attribute_phrase(singular(table), parts, "my" if owned else "the")
        select = {a: self._new_slot(f"{role}: {_attr_words(a)}", get_path(chosen, a)) for a in attrs}
        request.selectors.append(named_in_brief(role, named))
        request.selectors_mine.append(named_by_customer(role, named_mine))
        if role.endswith(f" {MEANT}"):  # the record the action is on: "close your savings account"
            request.named[request.selectors[-1]] = (role.removesuffix(f" {MEANT}"), named, named_mine)
        for slot in select.values():
            self.slot_said[slot] = (request.selectors[-1], request.selectors_mine[-1])
        return select

    def _owns(self, table: str, record: Record) -> bool:
        """Whether `record` is one of the caller's own rows (said "your order", "my order")."""
        key = self.domain.spec.tables[table].key if table in self.domain.spec.tables else None
        return key is not None and any(r.get(key) == record.get(key) for r in self.owned.get(table) or ())

    def _field_type(self, table: str, path: str) -> str | None:
        fspec = self.domain.spec.tables[table].fields.get(path) if table in self.domain.spec.tables else None
        return fspec.type if fspec is not None else None

    def _field_words(self, table: str, path: str) -> str:
        """How a person names a record's field: the spec's `label` (of this table's field, or of a
        nested record's), else its name spaced: "booking.seat_class" → "seat class"."""
        name, spec = path.rsplit(".", 1)[-1], self.domain.spec
        if table in spec.tables and name in spec.tables[table].fields:
            return spec.tables[table].fields[name].label or words(name)
        # a nested record's field (a booking listed with its showtime): the table that labels it
        return next((label for t in spec.tables if (label := field_label(spec, t, name))), words(name))

    def _distinguishing(self, table: str, chosen: Record, rows: list[Record]) -> list[str] | None:
        spec_fields = self.domain.spec.tables[table].fields if table in self.domain.spec.tables else {}
        fields = flat_fields(chosen)

        def kind(path: str) -> str | None:
            name = path.rsplit(".", 1)[-1]
            value = fields[path]
            if name in spec_fields and not isinstance(value, bool):
                return spec_fields[name].type
            return "str" if isinstance(value, str) else ("float" if isinstance(value, float) else None)

        def said(path: str) -> bool:  # a field a person may name the record by, in this request
            name = path.rsplit(".", 1)[-1]
            fspec = spec_fields.get(name) if "." not in path else None
            return name not in self.unsaid and not (fspec is not None and fspec.volatile)

        usable = [
            f
            for f, value in fields.items()
            if not f.rsplit(".", 1)[-1].endswith("_id")
            and said(f)
            and kind(f) in SELECTOR_TYPES
            and value is not None
            and not isinstance(value, bool)
            and say(value).strip()
        ]
        self.rng.shuffle(usable)
        usable.sort(key=lambda f: SELECTOR_TYPES[kind(f) or "str"])
        for f in usable:
            if singles_out(chosen, rows, [f]):
                return [f]
        for i, f in enumerate(usable):
            for g in usable[i + 1 :]:
                if singles_out(chosen, rows, [f, g]):
                    return [f, g]
        return None

    def _pick_info(
        self, record: Record, described: set[str], changed: set[str] = frozenset(), others: list[Record] = ()
    ) -> tuple[str, Any]:
        """A field of `record` to ask about: not what described it, not a value the customer states;
        where it was told apart from `others` (the rest of a list), one whose value none of them
        shares, so the answer shows whether the agent took the right record."""
        stated = list(self.slots.values())
        options = [
            (name, value)
            for name, value in flat_fields(record).items()
            if not name.endswith("_id")
            and name != "id"
            and name not in described
            and isinstance(value, str | int | float)
            and not isinstance(value, bool)
            and not any(value == s and type(value) is type(s) for s in stated)
            and not trivially_said(say(value))
        ]
        if not options:
            raise NoTaskError("nothing_to_ask", "the record has no field worth asking about")
        options = [(name, value) for name, value in options if all(get_path(r, name) != value for r in others)]
        if not options:
            raise NoTaskError("pick_without_bearing", "every field worth asking about reads the same on another record")
        now = [o for o in options if o[0] in changed]  # what the change left, when it can be asked
        return self.rng.choice(now or options)


def picked_attr(described: dict[str, Any]) -> str:
    """The attribute a description compares the records by (`{"pick": ...}`); "" for one by attributes."""
    pick = described.get("pick") or {}
    return str(pick.get("most") or pick.get("least") or "")


def _attr_words(path: str) -> str:
    """ "booking.seat_class" → "seat class"."""
    return words(path.rsplit(".", 1)[-1])
