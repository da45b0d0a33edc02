#!/usr/bin/env bash
# The GPU path in minutes, on one H100/H200 (issue 48): SFT 2 steps; GRPO 2 steps with vLLM
# colocated and 2 against `trl vllm-serve` on the same card (TRL's NCCL weight push); one
# `eval run` through `vllm serve`. Each stage prints PASS or FAIL and its time; the last line is a
# summary for BENCHMARKS.
#
#   pip install -e ".[train,gpu]"            # torch 2.13 + CUDA, vllm 0.31, trl 1.16
#   bash benchmarks/gpu_smoke.sh MODEL       # MODEL: a small causal LM, a local folder or a Hub id
#                                            # (default Qwen/Qwen3-0.6B; the machine must reach it)
#   bash benchmarks/gpu_smoke.sh --dry-run   # anywhere: prints the commands and checks the recipes
#                                            # with `train grpo --dry-run` (make test runs this)
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
MODEL=${1:-Qwen/Qwen3-0.6B}
WORK=${GPU_SMOKE_DIR:-$(mktemp -d -t toolscale-gpu-smoke-XXXX)}
STORE=$WORK/store.duckdb
PORT_TRL=${PORT_TRL:-8011}
PORT_VLLM=${PORT_VLLM:-8012}
read -r -a TOOLSCALE <<< "${TOOLSCALE:-toolscale}"  # the command, as words ("python -m toolscale")
SUMMARY=()

recipe() {  # recipe NAME MODE: a two-step GRPO recipe on bank tasks, sized for one card shared with vLLM
  cat > "$WORK/$1.yaml" <<EOF
model: $WORK/sft
out: $WORK/$1
domains: [bank]
tool_schemas: compact
limit: 32
max_steps: 2
batch_size: 4
num_generations: 4
max_new_tokens: 128
max_completion_length: 1024
max_turns: 6
bf16: true
save_steps: 2
use_vllm: true
vllm_mode: $2
vllm_gpu_memory_utilization: 0.25
vllm_max_model_length: 4096
vllm_server_base_url: http://127.0.0.1:$PORT_TRL
vllm_server_timeout: 600
EOF
}

stage() {  # stage NAME COMMAND...: run it (or print it), time it, record PASS/FAIL
  local name=$1; shift
  if [ "$DRY" = 1 ]; then echo "would run ($name): $*"; return 0; fi
  local start=$SECONDS
  if "$@" > "$WORK/$name.log" 2>&1; then
    SUMMARY+=("$name PASS $((SECONDS - start))s")
  else
    SUMMARY+=("$name FAIL $((SECONDS - start))s (see $WORK/$name.log)")
    tail -20 "$WORK/$name.log" >&2
  fi
  echo "${SUMMARY[-1]}"
}

wait_for() {  # wait_for URL SECONDS: until the server answers its health check
  local deadline=$((SECONDS + $2))
  until curl -sf "$1/health" > /dev/null; do
    if [ $SECONDS -ge $deadline ]; then echo "no answer from $1 after $2 s" >&2; return 1; fi
    sleep 3
  done
}

mkdir -p "$WORK"
recipe grpo-colocate colocate
recipe grpo-server server
if [ "$DRY" = 1 ]; then  # the recipes as the trainers would take them, and the memory they need
  "${TOOLSCALE[@]}" train sft --model "$MODEL" --out "$WORK/sft" --max-steps 2 -d bank --dry-run > "$WORK/sft.json"
  for name in grpo-colocate grpo-server; do
    "${TOOLSCALE[@]}" train grpo --recipe "$WORK/$name.yaml" --dry-run --gpus 1 > "$WORK/$name.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); t=d['trainer']; \
assert t['use_vllm'] and t['vllm_max_model_length'] == 4096, t; print(sys.argv[2], 'recipe ok:', \
t['vllm_mode'], 'memory', d['memory'].get('estimate'))" "$WORK/$name.json" "$name"
  done
fi

stage synth "${TOOLSCALE[@]}" synth all -d bank --per-domain 80 --store "$STORE"
stage sft "${TOOLSCALE[@]}" train sft --model "$MODEL" --out "$WORK/sft" --max-steps 2 -d bank --store "$STORE"
stage grpo-colocate "${TOOLSCALE[@]}" train grpo --recipe "$WORK/grpo-colocate.yaml" --store "$STORE"

if [ "$DRY" = 1 ]; then
  echo "would start: trl vllm-serve --model $WORK/sft --port $PORT_TRL --gpu-memory-utilization 0.3, then wait for /health"
else
  trl vllm-serve --model "$WORK/sft" --host 127.0.0.1 --port "$PORT_TRL" --gpu-memory-utilization 0.3 --max-model-len 4096 \
    > "$WORK/trl-serve.log" 2>&1 &
  TRL_PID=$!
  trap 'kill $TRL_PID 2>/dev/null || true' EXIT
  wait_for "http://127.0.0.1:$PORT_TRL" 600 || SUMMARY+=("trl-serve FAIL (see $WORK/trl-serve.log)")
fi
stage grpo-server "${TOOLSCALE[@]}" train grpo --recipe "$WORK/grpo-server.yaml" --store "$STORE"
[ "$DRY" = 1 ] || kill "$TRL_PID" 2>/dev/null || true

cat > "$WORK/models.toml" <<EOF
[models.smoke]
backend = "openai"
base_url = "http://127.0.0.1:$PORT_VLLM/v1"
model = "smoke"
price_as = "Qwen3-8B"
max_output_tokens = 256
EOF
if [ "$DRY" = 1 ]; then
  echo "would start: vllm serve $WORK/grpo-colocate --served-model-name smoke --port $PORT_VLLM (hermes tool calls)"
else
  vllm serve "$WORK/grpo-colocate" --served-model-name smoke --host 127.0.0.1 --port "$PORT_VLLM" --gpu-memory-utilization 0.5 \
    --max-model-len 8192 --enable-auto-tool-choice --tool-call-parser hermes > "$WORK/vllm-serve.log" 2>&1 &
  VLLM_PID=$!
  trap 'kill $VLLM_PID 2>/dev/null || true' EXIT
  wait_for "http://127.0.0.1:$PORT_VLLM" 600 || SUMMARY+=("vllm-serve FAIL (see $WORK/vllm-serve.log)")
fi
stage eval "${TOOLSCALE[@]}" eval run -p model:smoke --models "$WORK/models.toml" -d bank --limit 10 --store "$STORE"
[ "$DRY" = 1 ] || kill "$VLLM_PID" 2>/dev/null || true

if [ "$DRY" = 1 ]; then echo "dry run: recipes checked in $WORK"; exit 0; fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "gpu smoke ($MODEL): ${SUMMARY[*]}"
case "${SUMMARY[*]}" in *FAIL*) exit 1 ;; esac
