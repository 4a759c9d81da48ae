# syntax=docker/dockerfile:1
# ncclbot — the node agent image: topology, environment, Xid scan and NCCL probes,
# served over signed HTTP(S) on port 8470. Runs on every GPU node.
#
#   docker build -f deploy/docker/agent.Dockerfile -t ncclbot-agent:0.1.0 .
#
# Base: CUDA runtime, exact tag (add @sha256:<digest> for reproducible builds:
# `docker buildx imagetools inspect nvidia/cuda:12.4.1-runtime-ubuntu22.04`).
# torch comes from the PyTorch CUDA 12.4 index; its wheels bundle NCCL, so the probe
# measures the NCCL that torch ships. Match TORCH_VERSION / TORCH_INDEX to the CUDA
# and NCCL your training jobs use, so the probe exercises the same stack.
#
# Runtime needs (see docs/deploy.md, deploy/k8s/README.md):
#   * GPUs: the NVIDIA container toolkit injects /dev/nvidia*, libnvidia-ml and
#     nvidia-smi (NVIDIA_DRIVER_CAPABILITIES=compute,utility below).
#   * Linux capabilities: none by default (run with --cap-drop ALL). For NCCL over
#     InfiniBand/RoCE the process must be able to pin memory: raise the memlock limit
#     (`--ulimit memlock=-1:-1`) and/or add IPC_LOCK (`--cap-add IPC_LOCK`), and pass
#     the RDMA devices (`--device /dev/infiniband`).
#   * `--shm-size` of a few GiB (NCCL's shared-memory transport uses /dev/shm).
#   * Non-root: the agent refuses to start as root.
ARG CUDA_IMAGE=nvidia/cuda:12.4.1-runtime-ubuntu22.04
FROM ${CUDA_IMAGE}

ARG TORCH_VERSION=2.5.1
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu124
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# python3.10 (Ubuntu 22.04), RDMA userspace for NCCL's IB transport, and the small
# tools the diagnostics read (lspci, ip).
RUN apt-get update && \
    apt-get install -y --no-install-recommends \
        python3 python3-venv python3-pip ca-certificates \
        pciutils iproute2 ibverbs-providers libibverbs1 librdmacm1 ibverbs-utils && \
    rm -rf /var/lib/apt/lists/*

RUN python3 -m venv /opt/ncclbot/venv
ENV PATH=/opt/ncclbot/venv/bin:$PATH
RUN pip install --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY tools ./tools
COPY knowledge ./knowledge
RUN pip install ".[node]" && ncclbot --help >/dev/null && rm -rf /src

RUN groupadd --system --gid 10001 ncclbot && \
    useradd --system --uid 10001 --gid 10001 --home-dir /home/ncclbot --create-home \
        --shell /usr/sbin/nologin ncclbot && \
    install -d -o 10001 -g 10001 -m 0750 /var/log/ncclbot
COPY deploy/docker/agent-healthcheck.py /opt/ncclbot/agent-healthcheck.py

LABEL org.opencontainers.image.title="ncclbot-agent" \
      org.opencontainers.image.description="ncclbot node agent (CUDA, torch, NCCL probes)" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONUNBUFFERED=1 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    MPLCONFIGDIR=/tmp/matplotlib \
    NCCLBOT_AGENT_PORT=8470 \
    NCCLBOT_AGENT_AUDIT_LOG=/var/log/ncclbot/audit.jsonl
USER 10001:10001
WORKDIR /home/ncclbot
EXPOSE 8470
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "/opt/ncclbot/agent-healthcheck.py"]
ENTRYPOINT ["ncclbot"]
# The secret comes from NCCLBOT_AGENT_SECRET or (better) NCCLBOT_AGENT_SECRET_FILE.
CMD ["serve", "agent", "--host", "0.0.0.0", "--port", "8470", \
     "--audit-log", "/var/log/ncclbot/audit.jsonl"]
