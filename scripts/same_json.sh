#!/bin/bash
# Is the --json answer byte-identical to an earlier commit's for the same input?
#
#   bash scripts/same_json.sh REV      # e.g. main, or the commit before a refactor
#
# Runs `analyze --json` (the bundled sample, a real incident's log, a healthy log on stdin),
# `ask --json` (with each log, and without one) and `schema answer` in REV's tree and in this
# working tree, each with its own fresh data dir (one shared index dir), and prints SAME or
# DIFF per output; exits 1 on any DIFF.
set -u
REV=${1:?usage: scripts/same_json.sh REV}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
WORK=$(mktemp -d /tmp/ncclbot-same-json.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/base"
git -C "$ROOT" archive "$REV" | tar -x -C "$WORK/base"
export HF_HUB_OFFLINE=1 NCCLBOT_INDEX_DIR=${NCCLBOT_INDEX_DIR:-$WORK/index}
INCIDENT=$WORK/incident.log
"$PY" -c "import sys, yaml; open(sys.argv[2], 'w').write(yaml.safe_load(open(sys.argv[1]))['log'])" \
  "$ROOT/knowledge/incidents/llava-ddp-one-rank-index-assert-others-timeout.yaml" "$INCIDENT"
QUESTION="why did my training job crash?"
status=0
for side in base here; do
  tree=$WORK/base
  [ "$side" = here ] && tree=$ROOT
  run() { (cd "$tree" && NCCLBOT_DATA_DIR=$WORK/data-$side PYTHONPATH=$tree "$PY" -m bot.cli.main "$@"); }
  out=$WORK/$side
  mkdir -p "$out"
  run analyze examples/sample-8rank-oom.log --json > "$out/analyze-sample.json"
  run analyze "$INCIDENT" --json > "$out/analyze-incident.json"
  printf 'step 1 loss 2.3\nstep 2 loss 2.2\n' | run analyze - --json > "$out/analyze-stdin.json"
  run ask "$QUESTION" --log examples/sample-8rank-oom.log --json > "$out/ask-sample.json"
  run ask "$QUESTION" --log "$INCIDENT" --json > "$out/ask-incident.json"
  run ask "NCCL watchdog timeout on all ranks" --json > "$out/ask-nolog.json"
  run schema answer > "$out/schema.json"
done
for f in "$WORK"/here/*.json; do
  name=$(basename "$f")
  if cmp -s "$WORK/base/$name" "$f"; then
    echo "SAME $name ($(wc -c < "$f") bytes)"
  else
    echo "DIFF $name"; status=1
  fi
done
exit $status
