"""`toolscale corpus`: documents for the `search` tool, indexed beside the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolscale.cli.common import JsonFlag, StoreOption, console, print_json
from toolscale.qa.corpus import PASSAGE_WORDS, open_index, save_corpus
from toolscale.qa.sources import read_documents
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Build and search the document collections of question tasks.")


@app.command("build")
def build(
    source: Annotated[
        Path, typer.Argument(help="A folder of .txt/.md/.jsonl files, or a .parquet or .jsonl file of documents.")
    ],
    name: Annotated[str, typer.Option("--name", help="The corpus's name (questions name it).")] = "local",
    passage_words: Annotated[int, typer.Option(help="Words per passage.", min=20, max=2000)] = PASSAGE_WORDS,
    store: StoreOption = None,
) -> None:
    """Store SOURCE's documents as corpus NAME (replacing an earlier one) and index its passages
    for BM25 search (tantivy) in a folder beside the store. JSONL and Parquet records need a
    `text` field; `id`, `title` and `url` are read when present."""
    documents = list(read_documents(source))
    with Store(store) as db_store:
        run_id = db_store.start_run("corpus build", {"source": str(source), "name": name, "words": passage_words})
        built = save_corpus(db_store, name, documents, str(source), run_id, passage_words)
        db_store.finish_run(run_id, summary={"documents": built.documents, "passages": built.passages})
    console.print(f"{name}: {built.documents} documents, {built.passages} passages; index in {built.folder}",
                  markup=False)  # fmt: skip


@app.command("search")
def search(
    name: Annotated[str, typer.Argument(help="The corpus.")],
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    k: Annotated[int, typer.Option("-k", help="Passages to return.", min=1, max=100)] = 5,
    as_json: JsonFlag = False,
    store: StoreOption = None,
) -> None:
    """The K best passages of corpus NAME for QUERY, as the `search` tool returns them."""
    with Store(store, read_only=True) as db_store:
        hits = open_index(db_store, name).search(query, k)
    if as_json:
        print_json([h.to_dict() | {"score": h.score} for h in hits])
        return
    for hit in hits:
        console.print(f"{hit.score:7.3f}  {hit.passage_id}  {hit.title}: {hit.text[:160]}", markup=False)
    if not hits:
        console.print("no passage matches these words", markup=False)
