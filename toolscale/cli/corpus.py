"""`toolscale corpus`: documents for the `search` tool, indexed beside the store."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from toolscale.cli.common import JsonFlag, StoreOption, console, print_json
from toolscale.cli.progress import ProgressLines
from toolscale.qa.building import CorpusBuild, Progress
from toolscale.qa.corpus import PASSAGE_WORDS, BuiltCorpus, Document
from toolscale.qa.protocol import PROTOCOLS, shown_passages
from toolscale.qa.retrieval import RETRIEVALS, Retrieval, open_retriever
from toolscale.qa.sources import expected_documents, read_documents, source_fingerprint
from toolscale.store import Store

if TYPE_CHECKING:
    from toolscale.qa.vectors import IndexKind

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
    dense_url: Annotated[
        list[str] | None,
        typer.Option(
            "--dense-url",
            help="With --dense: embed through this server instead of the alias's (repeat it for several servers of "
            "the same model: requests are spread over them). Queries use the alias's own.",
        ),
    ] = None,
    dense_index: Annotated[
        str,
        typer.Option("--dense-index", help="flat (exact, 4 bytes a dimension) or ivfpq (compressed, approximate)."),
    ] = "flat",
    models: ModelsOption = None,
    store: StoreOption = None,
) -> None:
    """Store SOURCE's documents as corpus NAME (replacing an earlier one) and index its passages
    for BM25 search (tantivy) in a folder beside the store; with --dense, for dense search too
    (faiss, exact inner product of normalized embeddings). JSONL and Parquet records need a
    `text` field; `id`, `title` and `url` are read when present. Documents stream through the
    store in batches, so memory stays flat however large SOURCE is; a killed build is resumed by
    the same command."""
    if dense_index not in ("flat", "ivfpq"):
        raise typer.BadParameter("must be one of flat, ivfpq", param_hint="--dense-index")
    if dense_url and not dense:
        raise typer.BadParameter("needs --dense ALIAS (the model the servers serve)", param_hint="--dense-url")
    options = DenseOptions(dense, tuple(dense_url or ()), cast("IndexKind", dense_index)) if dense else None
    config = {"source": str(source), "name": name, "words": passage_words} | (
        {"dense": dense, "dense_index": dense_index} if dense else {})  # fmt: skip
    fingerprint, total = source_fingerprint(source), expected_documents(source)
    with Store(store) as db_store, _progress(total) as progress:
        run_id = db_store.start_run("corpus build", config)
        build = CorpusBuild(db_store, name, str(source), run_id, passage_words, fingerprint, progress)
        built, summary = _save(build, read_documents(source), options, models)
        db_store.finish_run(run_id, summary=summary | {"resumed": build.resumed})
    resumed = f" (resumed: {build.resumed:,} were stored by a killed build)" if build.resumed else ""
    console.print(f"{name}: {built.documents:,} documents, {built.passages:,} passages; index in {built.folder}"
                  f"{resumed}", markup=False, soft_wrap=True)  # fmt: skip
    if dense:
        reused = summary["embedded_chunks_resumed"]
        again = f"; {reused:,} chunks kept from an earlier try" if reused else ""
        console.print(f"dense: {summary['dense']} ({summary['embedding_tokens']} tokens embedded{again})",
                      markup=False, soft_wrap=True)  # fmt: skip


@dataclass(frozen=True)
class DenseOptions:
    alias: str
    urls: tuple[str, ...]
    kind: IndexKind


@contextmanager
def _progress(total: int | None) -> Iterator[Progress]:
    """Documents staged, then indexed: a bar on a terminal, a line every 30 s elsewhere (none
    after an error: the error is the one line)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    lines: dict[str, ProgressLines] = {}
    bars = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                console=console, transient=True, disable=not console.is_terminal)  # fmt: skip
    tasks: dict[str, Any] = {}

    def update(stage: str, done: int) -> None:
        if stage not in tasks:
            tasks[stage] = bars.add_task(f"documents {stage}", total=total)
            for earlier in lines.values():  # silent from now: the next stage's lines say where the build is
                earlier.stopped.set()
            lines.clear()
            lines[stage] = ProgressLines(f"corpus build: {stage}", " documents")
        bars.update(tasks[stage], completed=done)
        lines[stage].update(done, total)

    with bars:
        try:
            yield update
        except BaseException:
            for stage_lines in lines.values():
                stage_lines.stopped.set()
            raise
        for stage_lines in lines.values():
            stage_lines.close()


def _save(
    build: CorpusBuild, documents: Iterable[Document], dense: DenseOptions | None, models: Path | None
) -> tuple[BuiltCorpus, dict[str, Any]]:
    if not dense:
        built = build.run(documents)
        return built, {"documents": built.documents, "passages": built.passages}
    from toolscale.models.registry import load_registry, resolve
    from toolscale.qa.dense import Embedders, dense_settings, save_dense_corpus
    from toolscale.qa.vectors import load_faiss

    load_faiss()  # a missing extra or alias fails before any document is read into the store
    embedders = Embedders(resolve(dense.alias, load_registry(models)), dense.urls)
    try:
        built, embedded = save_dense_corpus(build, documents, embedders, dense.kind)
    finally:
        embedders.close()
    summary = {"documents": built.documents, "passages": built.passages,
               "dense": dense_settings(embedders, embedded, dense.kind), "embedding_tokens": embedded.tokens,
               "embedded_chunks_resumed": embedded.resumed}  # fmt: skip
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
    if as_json:  # each passage cut as the agent's `search` tool cuts it
        shown = shown_passages(hits, set(), PROTOCOLS["default"])
        print_json([found | {"score": hit.score} for hit, found in zip(hits, shown, strict=True)])
        return
    for hit in hits:
        console.print(f"{hit.score:7.3f}  {hit.passage_id}  {hit.title}: {hit.text[:160]}", markup=False)
    if not hits:
        console.print("no passage matches these words", markup=False)
