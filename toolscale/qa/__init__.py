"""Question answering, the paper's HLE/FRAMES half: `qa` tasks (a question, a typed gold answer,
the documents that support it), a local corpus with a BM25 index, the search / code / answer tools,
and grading of short answers."""
