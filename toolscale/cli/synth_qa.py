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
    store: StoreOption = None,
) -> None:
    """Write a page per catalog record (a hotel with its room types, a team with its games) as the
    corpus CORPUS, index it for search, and keep the questions over it that verify: each answer
    read back from its pages' text by its recorded chain, its pages retrievable, its names unique,
    a computed answer printed on none of its pages. Rejects are stored with their reasons."""
    options = QaSynthOptions(
        seed=seed, per_domain=per_domain, domains=tuple(domain or ()), corpus=corpus, test_percent=test_percent
    )
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
