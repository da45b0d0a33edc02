"""What `verify-dataset` found in a published folder: counts of what it checked and the problems,
one line each. Its own module so the service and question checks (publish/verify.py,
publish/verify_qa.py) both fill it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FolderCheck:
    domains: int = 0
    databases: int = 0
    tasks: int = 0
    reproduced: int = 0
    cells: int = 0  # cells whose digest was checked
    trajectories: int = 0  # sft rows re-derived and equal
    questions: int = 0
    answered: int = 0  # procedural questions that follow from the corpus config as their chains say
    documents: int = 0
    problems: list[str] = field(default_factory=list)
