"""The verifier's checks, one concern per module, run in order by `verify.check_task`: what every
check uses (`core.py`: the reject reasons, facts about a domain's tools, what the user says, who
calls), the gold replayed (`replay.py`), every argument's provenance and the records a task names
(`provenance.py`), the checks of the disambiguation and conditional families (`families.py`),
what the agent must say or refuse (`answers.py`), and what a kept task is filed under: its
difficulty, outcome, duplicate key and split (`verdict.py`)."""
