"""`toolscale corpus`: documents for the `search` tool, indexed beside the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from toolscale.cli.common import JsonFlag, StoreOption, console, print_json
from toolscale.errors import ToolscaleError
from toolscale.qa.corpus import PASSAGE_WORDS, BuiltCorpus, Document, save_corpus
from toolscale.qa.retrieval import RETRIEVALS, Retrieval, open_retriever
from toolscale.qa.sources import read_documents
from toolscale.store import Store

app = typer.Typer(no_args_is_help=True, help="Build and search the document collections of question tasks.")

ModelsOption = Annotated[Path | None, typer.Option("--models", help="Model registry (TOML) on top of the shipped one.")]


@app.command("build")
def build(
    source: Annotated[
        Path, typer.Argument(help="A folder of .txt/.md/.jsonl files, or a .parquet or .jsonl file of documents.")
    ],
    name: Annotated[str, typer.Option("--name", help="The corpus's name (questions name it).")] = "local",
    passage_words: Annotated[int, typer.Option(help="Words per passage.", min=20, max=2000)] = PASSAGE_WORDS,
    dense: Annotated[
        str | None,
        typer.Option(
            "--dense",
            help="Also embed every passage with this model alias (an OpenAI-compatible /v1/embeddings endpoint) "
            "into a faiss index, for --mode dense and hybrid.",
        ),
    ] = None,
    models: ModelsOption = None,
    store: StoreOption = None,
) -> None:
    """Store SOURCE's documents as corpus NAME (replacing an earlier one) and index its passages
    for BM25 search (tantivy) in a folder beside the store; with --dense, for dense search too
    (faiss, exact inner product of normalized embeddings). JSONL and Parquet records need a
    `text` field; `id`, `title` and `url` are read when present."""
    documents = list(read_documents(source))
    if not documents:  # a folder of files it does not read builds nothing: say so, not "0 documents"
        raise ToolscaleError(f"{source}: no documents (it reads .txt, .md, .jsonl and .parquet files)")
    config = {"source": str(source), "name": name, "words": passage_words} | ({"dense": dense} if dense else {})
    with Store(store) as db_store:
        run_id = db_store.start_run("corpus build", config)
        built, summary = _save(db_store, name, documents, str(source), run_id, passage_words, dense, models)
        db_store.finish_run(run_id, summary=summary)
    console.print(f"{name}: {built.documents} documents, {built.passages} passages; index in {built.folder}",
                  markup=False)  # fmt: skip
    if dense:
        console.print(f"dense: {summary['dense']} ({summary['embedding_tokens']} tokens embedded)", markup=False)


def _save(
    store: Store, name: str, documents: list[Document], source: str, run_id: str, words: int, dense: str | None,
    models: Path | None,
) -> tuple[BuiltCorpus, dict[str, Any]]:  # fmt: skip
    if not dense:
        built = save_corpus(store, name, documents, source, run_id, words)
        return built, {"documents": built.documents, "passages": built.passages}
    from toolscale.models.registry import load_registry, resolve
    from toolscale.qa.dense import load_faiss, save_dense_corpus
    from toolscale.qa.embeddings import EmbeddingClient

    load_faiss()  # a missing extra or alias fails before any document is read into the store
    embedder = EmbeddingClient(resolve(dense, load_registry(models)))
    try:
        built, vectors = save_dense_corpus(store, name, documents, source, run_id, embedder, words)
    finally:
        embedder.close()
    summary = {"documents": built.documents, "passages": built.passages, "dense": vectors.settings,
               "embedding_tokens": vectors.tokens}  # fmt: skip
    return built, summary


@app.command("search")
def search(
    name: Annotated[str, typer.Argument(help="The corpus.")],
    query: Annotated[str, typer.Argument(help="Words to look for.")],
    k: Annotated[int, typer.Option("-k", help="Passages to return.", min=1, max=100)] = 5,
    mode: Annotated[
        str, typer.Option("--mode", help="bm25, dense (the corpus's --dense index) or hybrid (both, rank-fused).")
    ] = "bm25",
    models: ModelsOption = None,
    as_json: JsonFlag = False,
    store: StoreOption = None,
) -> None:
    """The K best passages of corpus NAME for QUERY, as the `search` tool returns them."""
    if mode not in RETRIEVALS:
        raise typer.BadParameter(f"must be one of {', '.join(RETRIEVALS)}", param_hint="--mode")
    retrieval = cast(Retrieval, mode)
    with Store(store, read_only=True) as db_store:
        hits = open_retriever(db_store, name, retrieval, models).search(query, k)
    if as_json:
        print_json([h.to_dict() | {"score": h.score} for h in hits])
        return
    for hit in hits:
        console.print(f"{hit.score:7.3f}  {hit.passage_id}  {hit.title}: {hit.text[:160]}", markup=False)
    if not hits:
        console.print("no passage matches these words", markup=False)
