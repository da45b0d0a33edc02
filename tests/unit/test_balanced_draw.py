"""GRPO's `draw: family`: every question family (a service task's domain) drawn as often as the
largest, so a router is not pulled toward the model best on the commonest family."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from toolscale.train.examples import balanced, row_family
from toolscale.train.recipe import GRPORecipe


def _question(family: str, i: int) -> dict:
    return {"kind": "qa", "domain": "qa", "source": f"procedural:{family}", "id": f"{family}-{i}"}


def _rows() -> list[dict]:
    sizes = {"lookup": 9, "sum": 2, "table": 4}
    service = [{"domain": "bank", "id": f"bank-{i}", "source": "procedural"} for i in range(3)]
    return [_question(name, i) for name, n in sizes.items() for i in range(n)] + service


def test_every_family_is_drawn_as_often_as_the_largest_with_each_row_kept() -> None:
    rows = _rows()
    drawn = balanced(rows, seed=0)
    assert Counter(row_family(r) for r in drawn) == {"qa/lookup": 9, "qa/sum": 9, "qa/table": 9, "bank": 9}
    assert {r["id"] for r in drawn} == {r["id"] for r in rows}
    # repeats spread over the family: no row of a family drawn twice before another once more
    sums = Counter(r["id"] for r in drawn if row_family(r) == "qa/sum")
    assert sorted(sums.values()) == [4, 5]


def test_the_draw_is_seeded() -> None:
    assert balanced(_rows(), seed=3) == balanced(_rows(), seed=3)
    assert [r["id"] for r in balanced(_rows(), seed=3)] != [r["id"] for r in balanced(_rows(), seed=4)]


def test_imported_questions_are_one_family_per_source() -> None:
    assert row_family({"kind": "qa", "domain": "qa", "source": "import:frames"}) == "qa/import:frames"


def test_the_recipe_names_the_draw() -> None:
    assert GRPORecipe().draw == "natural" and GRPORecipe(draw="family").draw == "family"
    with pytest.raises(ValidationError):
        GRPORecipe(draw="shuffled")
