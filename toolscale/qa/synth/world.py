"""An encyclopedia beside the catalog's pages, so the embedded corpus is the size and shape of the
Wikipedia slice a FRAMES question reads: ~5,000 seeded pages of countries, cities, people,
companies, universities, teams, films and restaurants, each a lead in prose with the facts of an
infobox in it, linked to each other (a film's director is a person, whose birthplace is a city,
whose country is a country: chains of up to four pages), with the distractors Wikipedia has:
many restaurants in one city, names that share words ("Golden Harbor Films", "Golden Harbor
Foods"), records that differ in one field. Pure function of the seed: same seed, same pages."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolscale.domain.phrases import plural_noun
from toolscale.qa.synth.pages import Page, Table
from toolscale.qa.synth.subjects import Child, Subject

DOMAIN = "world"


def pool(text: str, sep: str = " ") -> tuple[str, ...]:
    return tuple(text.split(sep))


FIRST = pool(
    "Ada Alan Alice Amir Ana Anton Aria Ben Bianca Carl Clara Dario Dina Elena Emil Erik Eva Farah Felix "
    "Gia Hana Hugo Ida Igor Ines Ivan Jonas Julia Kai Kira Lars Lea Leon Lina Luca Maya Mila Nadia Nils "
    "Nora Omar Oskar Paula Pia Rafael Rosa Sami Sara Tariq Tess Ugo Vera Viktor Yara Zoe"
)
LAST = pool(
    "Abbott Adler Alvarez Bauer Becker Brandt Castillo Chen Costa Dahl Duarte Ekman Engel Falk Ferreira "
    "Fischer Garcia Haas Hansen Horvat Ibsen Ito Jansen Kaur Keller Klein Kovac Lang Larsen Lindqvist "
    "Lopes Marin Meyer Moreau Nagy Novak Nyberg Okafor Olsen Ortiz Park Petrov Quinn Rossi Ruiz Sato "
    "Schmid Silva Sorensen Tanaka Torres Ueda Varga Vogel Wagner Weber Yilmaz Zhou Zimmer"
)
TOWN_HEADS = pool(
    "Ash Bel Brook Cedar Clear Crow Elm Fair Glen Green High Iron Lake Marsh Mill North Oak Pine Red "
    "River Rock Silver Stone Storm Sun West Wind Wolf"
)
TOWN_TAILS = pool("ford haven vale wick field bury mouth ton port stead brook dale gate holm moor ridge shaw well")
COUNTRIES = pool(
    "Veloria Ostmark Caldera Norvania Estovia Marenne Tirasol Kelvar Aurenia Brisk Dunmoor Halvenia "
    "Lusitra Montvar Pelorin Quenna Sardova Thessaly Umbria Zeland"
)
CONTINENTS = ("Northland", "Southland", "Eastmark", "Westreach")
WORDS = pool(
    "Amber Atlas Blue Bright Copper Crystal Golden Harbor Horizon Iron Lantern Maple Meridian North Oak "
    "Orbit Pioneer Quartz Red Silver Star Summit Swift True Vista"
)
COMPANY_KINDS = pool("Foods Films Motors Labs Systems Media Energy Textiles Pharma Logistics")
INDUSTRIES = ("food", "film", "automotive", "research", "software", "media", "energy", "textiles", "pharmaceuticals",
              "logistics")  # fmt: skip
OCCUPATIONS = ("architect", "chef", "engineer", "film director", "historian", "lawyer", "painter", "physician",
               "politician", "scientist", "writer", "coach")  # fmt: skip
SPORTS = ("football", "basketball", "hockey", "baseball")
MASCOTS = ("Hawks", "Foxes", "Lions", "Comets", "Rangers", "Pilots", "Wolves", "Tigers", "Giants", "Otters")
FILM_HEADS = pool(
    "The Last|A Quiet|The Silent|Beyond the|The Crimson|Under the|The Hidden|After the|The Long|The Broken|"
    "The Distant|Across the|The Second|A Winter|The Glass|Behind the|The Empty|The Golden",
    sep="|",
)
FILM_TAILS = pool(
    "River Winter Garden Harbor Signal Mountain Letter Orchard Frontier Lantern Machine Voyage Island "
    "Station Tower Canyon Meadow Bridge Archive Kingdom Compass Forest Shore Echo"
)
CUISINES = ("Italian", "Mexican", "Thai", "Japanese", "Indian", "French", "Greek", "Ethiopian", "Korean", "Spanish")
PLACES = pool("Bistro Kitchen Table Grill House Cantina Diner Tavern Cafe Eatery")
STREETS = pool(
    "Main Street|Harbor Road|Mill Lane|Station Road|King Street|Park Avenue|Market Square|Bridge Street",
    sep="|",
)
COUNTS = {"city": 440, "person": 2100, "company": 700, "university": 140, "team": 220, "film": 420,
          "restaurant": 820}  # fmt: skip


@dataclass
class Entity:
    kind: str
    key: str
    title: str
    values: dict[str, Any]  # label → value (a str, an int, a float or a date); a link is another Entity's title
    types: dict[str, str]  # label → field type (str, enum, int, float, date, ref)


class World:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"qa-world:{seed}")
        self.entities: dict[str, list[Entity]] = {}
        self.titles: set[str] = set()

    def build(self) -> dict[str, list[Entity]]:
        self._countries()
        for kind in ("city", "person", "company", "university", "team", "film", "restaurant"):
            self.entities[kind] = [self._make(kind, i) for i in range(COUNTS[kind])]
            self.entities[kind] = [e for e in self.entities[kind] if e is not None]
        self._link_later()
        return self.entities

    def _unique(self, make: Callable[[], str]) -> str | None:
        for _ in range(40):
            title = make()
            if title not in self.titles:
                self.titles.add(title)
                return title
        return None

    def _pick(self, kind: str) -> str:
        return self.rng.choice(self.entities[kind]).title

    def _date(self, first: int, last: int) -> str:
        return (dt.date(first, 1, 1) + dt.timedelta(days=self.rng.randrange((last - first) * 365))).isoformat()

    def _countries(self) -> None:
        found = []
        for i, name in enumerate(COUNTRIES):
            self.titles.add(name)
            values = {"Continent": self.rng.choice(CONTINENTS), "Population": self.rng.randrange(800_000, 90_000_000),
                      "Founding date": self._date(1700, 1960), "Calling code": f"+{10 + i * 7}"}  # fmt: skip
            found.append(Entity("country", f"C{i:03d}", name, values, _types(values, enum=("Continent",))))
        self.entities["country"] = found

    def _make(self, kind: str, i: int) -> Entity | Any:
        title = self._unique(getattr(self, f"_{kind}_title"))
        if title is None:
            return None
        values: dict[str, Any] = getattr(self, f"_{kind}_values")(title)
        refs = REFS.get(kind, ())
        return Entity(kind, f"{kind[:2].upper()}{i:04d}", title, values,
                      _types(values, enum=ENUMS.get(kind, ()), ref=refs))  # fmt: skip

    def _city_title(self) -> str:
        return self.rng.choice(TOWN_HEADS) + self.rng.choice(TOWN_TAILS)

    def _city_values(self, title: str) -> dict[str, Any]:
        return {"Country": self._pick("country"), "Population": self.rng.randrange(8_000, 2_400_000),
                "Founding date": self._date(1200, 1950),
                "Elevation in metres": self.rng.randrange(2, 2400)}  # fmt: skip

    def _person_title(self) -> str:
        return f"{self.rng.choice(FIRST)} {self.rng.choice(LAST)}"

    def _person_values(self, title: str) -> dict[str, Any]:
        return {"Birth date": self._date(1900, 2001), "Birthplace": self._pick("city"),
                "Occupation": self.rng.choice(OCCUPATIONS),
                "Height in centimetres": self.rng.randrange(150, 201)}  # fmt: skip

    def _company_title(self) -> str:
        first, second = self.rng.sample(WORDS, 2)  # two different words: no "Copper Copper Foods"
        return f"{first} {second} {self.rng.choice(COMPANY_KINDS)}"

    def _company_values(self, title: str) -> dict[str, Any]:
        industry = INDUSTRIES[COMPANY_KINDS.index(title.split()[-1])]
        return {"Industry": industry, "Headquarters": self._pick("city"), "Founding date": self._date(1850, 2020),
                "Founder": self._pick("person"), "Employees": self.rng.randrange(12, 90_000),
                "Revenue in millions": round(self.rng.uniform(0.5, 9000), 1)}  # fmt: skip

    def _university_title(self) -> str:
        return f"{self._pick('city')} {self.rng.choice(('University', 'Institute of Technology', 'College'))}"

    def _university_values(self, title: str) -> dict[str, Any]:
        return {"City": title.split()[0], "Founding date": self._date(1300, 1990),
                "Students": self.rng.randrange(900, 60_000), "President": self._pick("person")}  # fmt: skip

    def _team_title(self) -> str:
        return f"{self._pick('city')} {self.rng.choice(MASCOTS)}"

    def _team_values(self, title: str) -> dict[str, Any]:
        return {"City": title.split()[0], "Sport": self.rng.choice(SPORTS), "Founding date": self._date(1880, 2015),
                "Coach": self._pick("person"), "Championships": self.rng.randrange(0, 19)}  # fmt: skip

    def _film_title(self) -> str:
        return f"{self.rng.choice(FILM_HEADS)} {self.rng.choice(FILM_TAILS)}"

    def _film_values(self, title: str) -> dict[str, Any]:
        studios = [c for c in self.entities["company"] if c.title.endswith("Films")]
        return {"Director": self._pick("person"), "Studio": self.rng.choice(studios).title,
                "Release date": self._date(1950, 2026), "Running time in minutes": self.rng.randrange(78, 181),
                "Box office in millions": round(self.rng.uniform(0.2, 900), 1)}  # fmt: skip

    def _restaurant_title(self) -> str:
        first, second = self.rng.sample(WORDS, 2)
        return f"{first} {second} {self.rng.choice(PLACES)}"

    def _restaurant_values(self, title: str) -> dict[str, Any]:
        return {"City": self._pick("city"), "Street": self.rng.choice(STREETS), "Cuisine": self.rng.choice(CUISINES),
                "Chef": self._pick("person"), "Rating": round(self.rng.uniform(2.5, 5.0), 1),
                "Opening date": self._date(1960, 2026)}  # fmt: skip

    def _link_later(self) -> None:
        """People work for companies and studied at universities, cities have mayors: links to kinds
        made after them."""
        for person in self.entities["person"]:
            person.values["Employer"] = self._pick("company")
            person.values["Alma mater"] = self._pick("university")
            person.types |= {"Employer": "ref", "Alma mater": "ref"}
        for city in self.entities["city"]:
            city.values["Mayor"] = self._pick("person")
            city.types["Mayor"] = "ref"


REFS = {"city": ("Country",), "person": ("Birthplace",), "company": ("Headquarters", "Founder"),
        "university": ("City", "President"), "team": ("City", "Coach"), "film": ("Director", "Studio"),
        "restaurant": ("City", "Chef")}  # fmt: skip
ENUMS = {"person": ("Occupation",), "company": ("Industry",), "team": ("Sport",), "restaurant": ("Cuisine",)}
# the pages that list what links to them, as a table: a studio's films, a university's alumni
CHILDREN = {("company", "film", "Studio"): ("Title", "Release date", "Running time in minutes",
                                            "Box office in millions"),
            ("university", "person", "Alma mater"): ("Name", "Birth date", "Occupation", "Height in centimetres"),
            ("city", "restaurant", "City"): ("Name", "Cuisine", "Rating", "Opening date")}  # fmt: skip
ROW_NOUNS = {"person": "graduate"}  # a university's people are its graduates
NOUNS = {"city": "city", "person": "person", "company": "company", "university": "university", "team": "team",
         "film": "film", "restaurant": "restaurant", "country": "country"}  # fmt: skip


def _types(values: dict[str, Any], enum: tuple[str, ...] = (), ref: tuple[str, ...] = ()) -> dict[str, str]:
    found = {}
    for label, value in values.items():
        if label in ref:
            found[label] = "ref"
        elif label in enum:
            found[label] = "enum"
        elif isinstance(value, bool):
            found[label] = "bool"
        elif isinstance(value, int):
            found[label] = "int"
        elif isinstance(value, float):
            found[label] = "float"
        elif isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-":
            found[label] = "date"
        else:
            found[label] = "str"
    return found


def world_pages(seed: int) -> tuple[list[Page], dict[tuple[str, str], str]]:
    """The world's pages and the type of each (kind, label), as `Material` reads them."""
    entities = World(seed).build()
    pages, types = [], {}
    for kind, found in entities.items():
        subject = Subject(kind, NOUNS[kind], ("name",), tuple(_children(kind)))
        for entity in found:
            page = Page(DOMAIN, subject, {"name": entity.title}, entity.title, f"{DOMAIN}/{kind}/{entity.key}")
            page.facts = {label: show(value) for label, value in entity.values.items()}
            page.fields = {label: label.lower().replace(" ", "_") for label in entity.values}
            types |= {(kind, label): kind_of for label, kind_of in entity.types.items()}
            pages.append(page)
    by_title = {page.title: page for page in pages}
    for page in pages:
        page.tables = _tables(page, pages, by_title)
        page.text = page_text(page)
    return pages, types


def _children(kind: str) -> list[Child]:
    return [Child(child, link.lower().replace(" ", "_"), ROW_NOUNS.get(child, NOUNS[child]))
            for (parent, child, link) in CHILDREN if parent == kind]  # fmt: skip


def _tables(page: Page, pages: list[Page], by_title: dict[str, Page]) -> list[Table]:
    tables = []
    for (parent, child, link), columns in CHILDREN.items():
        if page.subject.table != parent:
            continue
        rows = [p for p in pages if p.subject.table == child and p.facts.get(link) == page.title]
        if len(rows) < 2:
            continue
        shown = [{columns[0]: p.title} | {c: p.facts[c] for c in columns[1:]} for p in rows[:20]]
        noun = ROW_NOUNS.get(child, NOUNS[child])
        heading = plural_noun(noun).capitalize()
        tables.append(Table(heading, Child(child, link, noun), list(columns), shown, [p.record for p in rows]))
    return tables


def show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return str(value)


LEADS = {
    "country": "{t} is a country in {Continent}, founded on {Founding date}, with a population of {Population}.",
    "city": "{t} is a city in {Country}, founded on {Founding date}. Its mayor is {Mayor}.",
    "person": "{t} is a {Occupation} born on {Birth date} in {Birthplace}, who works for {Employer}.",
    "company": "{t} is a {Industry} company founded on {Founding date} by {Founder}, headquartered in {Headquarters}.",
    "university": "{t} is a university in {City}, founded on {Founding date}, whose president is {President}.",
    "team": "The {t} are a {Sport} team from {City}, founded on {Founding date} and coached by {Coach}.",
    "film": "{t} is a film directed by {Director} for {Studio}, released on {Release date}.",
    "restaurant": "{t} is a {Cuisine} restaurant on {Street} in {City}, opened on {Opening date}; its chef is {Chef}.",
}


def page_text(page: Page) -> str:
    """A lead in prose, then the infobox (`- Label: value`), then the tables."""
    lead = re.sub(r"\ba (?=[AEIOUaeiou](?!ni))", "an ", LEADS[page.subject.table].format(t=page.title, **page.facts))
    parts = [f"# {page.title}", lead, "\n".join(f"- {label}: {value}" for label, value in page.facts.items())]
    for table in page.tables:
        lines = ["| " + " | ".join(table.columns) + " |", "|" + " --- |" * len(table.columns)]
        lines += ["| " + " | ".join(row.get(c, "") for c in table.columns) + " |" for row in table.rows]
        parts += [f"## {table.heading}", "\n".join(lines)]
    return "\n\n".join(parts)
