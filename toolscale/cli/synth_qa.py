"""`toolscale synth qa`: the embedded question set (the paper's FRAMES-style half)."""

from __future__ import annotations

from typing import Annotated

import typer

from toolscale.cli.common import DomainOption, SeedOption, StoreOption, console
from toolscale.qa.synth.run import QA_SYNTH_VERSION, QaSynthOptions, synth_qa
from toolscale.store import Store


def qa(
    domain: DomainOption = None,
    per_domain: Annotated[int, typer.Option("--per-domain", min=1, max=5000, help="Questions kept per domain.")] = 150,
    seed: SeedOption = 0,
    corpus: Annotated[str, typer.Option("--corpus", help="The corpus the pages are stored as.")] = "catalog",
    test_percent: Annotated[int, typer.Option("--test-percent", min=0, max=100, help="Share in test.")] = 20,
    split_by: Annotated[
        str,
        typer.Option("--split-by", help="What test holds out: question, template (whole wordings) or family."),
    ] = "question",
    world_questions: Annotated[
        int, typer.Option("--world-questions", min=1, max=20_000, help="Questions kept from the encyclopedia.")
    ] = 1_200,
    store: StoreOption = None,
) -> None:
    """Write a page per catalog record (a hotel with its room types, a team with its games) and the
    encyclopedia's pages (domain `world`) as the corpus CORPUS, index it for search, and keep the
    questions over it that verify: each answer read back from its pages' text by its recorded
    chain, the lines it reads retrievable, its names unique, its answer in neither its pages (when
    computed) nor its own words. Rejects are stored with their reasons."""
    if split_by not in ("question", "template", "family"):
        raise typer.BadParameter("must be question, template or family", param_hint="--split-by")
    options = QaSynthOptions(
        seed=seed, per_domain=per_domain, domains=tuple(domain or ()), corpus=corpus, test_percent=test_percent,
        split_by=split_by, world_questions=world_questions,
    )  # fmt: skip
    with Store(store) as db_store:
        config = options.model_dump(mode="json") | {"version": QA_SYNTH_VERSION}
        run_id = db_store.start_run("synth qa", config, seed=seed)
        summary = synth_qa(db_store, options, run_id)
        db_store.finish_run(run_id, summary=summary.to_dict())
    if summary.skipped:
        console.print(f"{corpus}: already synthesized with these options; nothing to do", markup=False)
        return
    kept = sum(summary.kept.values())
    rejected = ", ".join(f"{reason} {n}" for reason, n in summary.rejected.most_common()) or "none"
    families = ", ".join(f"{name} {n}" for name, n in summary.families.most_common())
    console.print(f"{corpus}: {summary.documents} pages, {summary.passages} passages indexed", markup=False)
    console.print(f"kept {kept} verified questions ({families}); rejected: {rejected}", markup=False)
