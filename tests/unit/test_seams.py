"""Template seams (issue 30): what `synth/seams.py` finds, and the seams the generator no longer
leaves in any task of any catalog domain."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from toolscale.domain.catalog import catalog
from toolscale.domain.populate import populate
from toolscale.synth.builder.assemble import GUARDIAN
from toolscale.synth.generate import GenConfig, NoTaskError, TaskGenerator
from toolscale.synth.rules import tool_graph
from toolscale.synth.scenario import customer_text, singular, user_text
from toolscale.synth.seams import field_names, placeholders, seams
from toolscale.synth.voices import second_person

# every seam `seams` finds (and `placeholder`, on the facts)
FIXED = ("whose_is", "snake_case", "doubled_noun", "of_my_person", "label_colon", "field_name")
PER_DOMAIN = 120


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I mean the movie whose rating is NC-17.", "whose_is"),
        ("I want customer_request as the reason.", "snake_case"),
        ("Give Miami Tide as the team's team.", "doubled_noun"),
        ("Can you look up the city of my customer?", "of_my_person"),
        ("Pick RES-0036 as the reservation: number.", "label_colon"),
        ("What is the temperature c of my observation?", "field_name"),
    ],
)
def test_each_seam_is_found(text, kind):
    assert set(seams(text, ("customer",), ("temperature c",))) == {kind}


@pytest.mark.parametrize(
    "text",
    ["My email is john_doe@example.com.", "The user id is mia_li_3668.", "It's the card ending in 4798.",
     "Could you tell me your city?", "the cap room of your team", "I'd like to pay with store credit."],
)  # fmt: skip
def test_what_people_write_is_no_seam(text):
    assert not seams(text, ("customer",), ("temperature c",))


def test_field_names_are_those_that_read_as_columns():
    """A field said by its name only where the name is English: `temperature_c` and `member_since`
    are seams (a label says them), `total_paid` is not."""
    weather = catalog()["weather"].spec
    assert {"temperature c", "member since", "precipitation mm"} <= set(field_names(weather))
    assert "observed on" not in field_names(weather)
    assert field_names(catalog()["bank"].spec) == ()


def test_a_placeholder_is_a_fact_whose_value_is_the_samplers_filler_word():
    assert placeholders({"injury": "maple", "reason": "persistent cough", "variant: color": "blue"}) == ["injury"]


@functools.cache
def sample(name: str) -> tuple[dict[str, Any], ...]:
    domain = catalog()[name]
    generator = TaskGenerator(domain, populate(domain, seed=0), {"db_id": "t", "seed": 0, "records": None}, GenConfig())
    found = []
    for index in range(PER_DOMAIN):
        try:
            found.append(generator.generate(index))
        except NoTaskError:
            continue
    return tuple(found)


@pytest.mark.parametrize("name", sorted(catalog()))
def test_no_task_has_a_seam_the_generator_no_longer_makes(name):
    """ "The one whose X is Y", raw snake_case values, "the team's team", "the city of your customer",
    a slot's label read out, a column's name ("the temperature c"), a placeholder word as free
    text: none in the brief or the customer's lines of any task."""
    people = tuple(singular(t) for t in tool_graph(catalog()[name]).person_tables if singular(t) != "team")
    fields = field_names(catalog()[name].spec)
    tasks = sample(name)
    assert len(tasks) > PER_DOMAIN // 2
    for task in tasks:
        text = f"{user_text(task['user_scenario'])}\n{customer_text(task['customer'])}"
        found = {kind for kind in seams(text, people, fields) if kind in FIXED}
        assert not found, f"{task['id']}: {found}"
        assert not placeholders(task["provenance"]["slots"]), task["id"]


@pytest.mark.parametrize("name", sorted(catalog()))
def test_every_task_has_a_motive_and_a_persona_from_its_domain(name):
    """Why the customer calls is the domain's motive for one of the task's tools, in the brief's
    second person; who they are is one of the domain's personas for their table, or, calling for a
    child's record, its parent or guardian (never a child with an adult's job)."""
    spec = catalog()[name].spec
    motives = {second_person(m) for tool in spec.tools for m in tool.motives or ()}
    personas = {p for table in (spec.personas or {}).values() for p in table}
    for task in sample(name):
        reason = task["user_scenario"]["instructions"]["reason_for_call"]
        assert any(reason.startswith(m) for m in motives), reason
        persona = task["user_scenario"]["persona"]
        said = [f"{mark} {p}." for p in [*personas, GUARDIAN] for mark in (",", ":")]
        assert any(s in persona for s in said), persona
