"""Probe presets: the one table of named `probe` parameter sets that the LLM agent may propose,
Slack buttons and `/nccl probe` run, and the node agent receives (pure data). The first is
the default (`ToolSpec.default_preset`)."""

from __future__ import annotations

PROBE_PRESETS: dict[str, dict[str, object]] = {
    "quick": {"collectives": ["all_reduce"], "min_bytes": 1 << 20, "max_bytes": 128 << 20,
              "factor": 2.0, "iters": 10, "warmup": 3, "timeout": 180.0},
    "allreduce": {"collectives": ["all_reduce"], "min_bytes": 1024, "max_bytes": 1 << 30,
                  "factor": 2.0, "timeout": 300.0},
    "full": {"min_bytes": 1024, "max_bytes": 1 << 30, "factor": 2.0, "timeout": 600.0},
    "gloo": {"backend": "gloo", "nproc": 2, "collectives": ["all_reduce"], "min_bytes": 1024,
             "max_bytes": 1 << 20, "factor": 4.0, "iters": 3, "warmup": 1, "timeout": 120.0},
}
