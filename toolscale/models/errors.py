"""The error a model call ends in when it fails for good, importable without the `openai` SDK (the
episode catches it, and code that never calls a model should not pay the SDK's import)."""

from __future__ import annotations

from toolscale.errors import ToolscaleError


class ModelCallError(ToolscaleError):
    """A model call that failed for good: a 4xx, or retries exhausted (on 429, 5xx, timeouts,
    connection errors, malformed or oversized replies)."""
