"""Which requests get evaluated: the sampler, the per-minute budget and the coverage it keeps."""

from __future__ import annotations

from ragpulse.sampling.sampler import EvalSampler

__all__ = ["EvalSampler"]
