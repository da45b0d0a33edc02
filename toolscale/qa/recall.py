"""Retrieval recall@k: for each question with supporting documents, the share of them that the
top-k passages for the question's own words come from (a reader's first query, before any
rewriting), averaged over questions."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from toolscale.qa.links import found_share
from toolscale.qa.question import Question
from toolscale.qa.retrieval import Retriever


@dataclass(frozen=True)
class Recall:
    k: int
    questions: int  # those with supporting documents
    recall: float  # mean over questions of (supporting documents found / supporting documents)
    all_found: float  # share of questions whose every supporting document was found


def recall_at_k(index: Retriever, questions: Iterable[Question], k: int = 5) -> Recall:
    shares: list[float] = []
    complete: list[bool] = []
    for question in questions:
        if not question.supporting:
            continue
        hits = index.search(question.question, k)
        found, wanted = found_share(question.supporting, [hit.doc_id for hit in hits] + [h.url for h in hits if h.url])
        shares.append(found / max(wanted, 1))
        complete.append(found == wanted)
    if not shares:
        return Recall(k, 0, 0.0, 0.0)
    return Recall(k, len(shares), statistics.fmean(shares), statistics.fmean(complete))
