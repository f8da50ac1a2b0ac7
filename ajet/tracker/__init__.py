"""The context tracker: records LLM calls token for token and merges them into samples."""

from ajet.tracker.merge import MergeStats, build_samples, merge_calls

__all__ = ["MergeStats", "build_samples", "merge_calls"]
