"""The NCCL/gloo bandwidth probe: parameters, presets, launch, workers, nccl-tests, baselines."""
