"""toolscale: verified tool-use data, orchestrator training and cost-aware evaluation."""

__version__ = "0.1.0"
