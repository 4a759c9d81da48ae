"""`libs`: the NCCL/CUDA/cuDNN/torch libraries a running job's ranks actually loaded."""
