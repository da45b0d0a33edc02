"""The core every task family builds on: one candidate task's state, who calls, sampling a call
around them, a provenance for every argument (`grounding.py`), how the user singles a record out
(`describe.py`, in the sentences of `phrasing.py`), and the task assembled and checked
(`assemble.py`)."""
