"""What the synthesis stages (`pipeline.py`, and `paraphrase.py`) run on: their options and one
domain's inputs (`options.py`), the work a worker process does on a shard and the pool that runs it
(`workers.py`), what the store holds of each shard (`shards.py`), and tasks read back from the
store and checked again (`stored.py`)."""
