"""FRAMES' links compared as links (issue 49 §3): the forms people copy a Wikipedia URL in are one
page; different pages stay different."""

from __future__ import annotations

import json

import pytest

from toolscale.qa.episode import retrieved_share
from toolscale.qa.links import found_share, link_key
from toolscale.qa.question import Question

ZURICH = "https://en.wikipedia.org/wiki/Z%C3%BCrich"


@pytest.mark.parametrize(
    "same",
    ["https://en.wikipedia.org/wiki/Zürich", "http://en.wikipedia.org/wiki/Z%C3%BCrich",
     "https://en.m.wikipedia.org/wiki/Z%C3%BCrich", "https://en.wikipedia.org/wiki/Z%C3%BCrich#History",
     "https://en.wikipedia.org/wiki/Z%C3%BCrich/", "en.wikipedia.org/wiki/Zürich", "www.wikipedia.org/wiki/Zürich",
     "https://en.wikipedia.org/w/index.php?title=Z%C3%BCrich&oldid=1", "Zürich", "zürich"],
)  # fmt: skip
def test_the_forms_of_one_page_are_one_key(same):
    assert link_key(same) == link_key(ZURICH) == "wiki:Zürich"


def test_titles_with_spaces_or_underscores_are_one_page_and_other_pages_stay_apart():
    assert link_key("https://en.wikipedia.org/wiki/Black_Forest") == link_key("Black Forest") == "wiki:Black_Forest"
    assert link_key("https://en.wikipedia.org/wiki/Black%20Forest") == "wiki:Black_Forest"
    different = ["https://en.wikipedia.org/wiki/Zurich_(disambiguation)", "https://en.wikipedia.org/wiki/Z%C3%BCrich_Airport",
                 "https://de.wikipedia.org/wiki/Basel", "https://example.org/wiki/Z%C3%BCrich"]  # fmt: skip
    assert all(link_key(link) != link_key(ZURICH) for link in different)
    assert link_key("https://example.org/a/b/") == link_key("http://www.example.org/a/b") == "example.org/a/b"
    # a title with a dot is a title, not a host
    assert link_key("Node.js") == link_key("https://en.wikipedia.org/wiki/Node.js") == "wiki:Node.js"


def test_a_question_s_pages_count_as_found_in_whatever_form_the_search_returned_them():
    pages = ("https://en.wikipedia.org/wiki/Z%C3%BCrich", "https://en.m.wikipedia.org/wiki/Danube#Course")
    question = Question(id="q", question="?", answer="Germany, 4", answer_type="free_text", corpus="wikipedia",
                        supporting=pages)  # fmt: skip
    hits = [{"doc": "Zürich", "url": "https://en.wikipedia.org/wiki/Zürich", "text": "..."},
            {"doc": "Danube", "url": "http://en.wikipedia.org/wiki/Danube", "text": "..."}]  # fmt: skip
    transcript = [{"role": "tool", "name": "search", "content": json.dumps(hits)}]
    assert retrieved_share(question, transcript) == 1.0
    assert retrieved_share(question, [{"role": "tool", "name": "search", "content": json.dumps(hits[:1])}]) == 0.5
    assert found_share(["Zürich", "Basel"], ["https://en.wikipedia.org/wiki/Z%C3%BCrich"]) == (1, 2)
