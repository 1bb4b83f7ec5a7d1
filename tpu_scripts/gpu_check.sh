#!/usr/bin/env bash
# The GPU check: the same jaxseeker commands on one CUDA machine, ending in one table.
#
#   bash tpu_scripts/gpu_check.sh              # install, then every stage (about 10 minutes on one H100/H200)
#   bash tpu_scripts/gpu_check.sh --no-install # reuse $VENV (a machine without internet access)
#   bash tpu_scripts/gpu_check.sh --dry-run    # print each stage's command, run nothing
#
# Stages: install jax[cuda12]==$JAX_VERSION and the project → list devices → model parity tests (HF transformers,
# f32) → attention implementations (reference vs jax_xla / cudnn / splash interpreted) → `jaxseeker pipeline
# --quick` up to its tokenizer for trajectories → a short SFT twice on every local GPU (mesh fsdp = all of them),
# XLA attention in f32 and cuDNN flash attention in bf16 → a short RL run on every local GPU (the toy colour task) →
# `jaxseeker bench generate` → `jaxseeker bench sft` → the table. Logs go to $OUT (runs/gpu_check).
# A stage that fails is marked FAIL in the table; the others still run. JAX preallocates the share of GPU memory
# the planner budgets (XLA_PYTHON_CLIENT_MEM_FRACTION, unless set).
set -u
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv-gpu}
JAX_VERSION=${JAX_VERSION:-0.10.2}  # the jax (and its CUDA plugin) the check installs: the version the tests pin
OUT=${OUT:-runs/gpu_check}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-900}
DRY_RUN=0
INSTALL=1
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    --no-install) INSTALL=0 ;;
    *) echo "gpu_check.sh: unknown argument $arg (use --dry-run, --no-install)" >&2; exit 2 ;;
  esac
done
PY="$VENV/bin/python"
JS="$VENV/bin/jaxseeker"

# JAX preallocates 75% of each GPU unless told otherwise; a plan fills up to USABLE_HBM of it (the planner's
# budget, read from jaxseeker/planning/chips.py). A fraction the user set stands.
if [ -z "${XLA_PYTHON_CLIENT_MEM_FRACTION:-}${XLA_CLIENT_MEM_FRACTION:-}" ]; then
  XLA_PYTHON_CLIENT_MEM_FRACTION=$(python3 -c 'import runpy; print(runpy.run_path("jaxseeker/planning/chips.py")["USABLE_HBM"])')
  export XLA_PYTHON_CLIENT_MEM_FRACTION
fi
[ -n "${XLA_PYTHON_CLIENT_MEM_FRACTION:-}" ] && echo "export XLA_PYTHON_CLIENT_MEM_FRACTION=$XLA_PYTHON_CLIENT_MEM_FRACTION"

# stage NAME COMMAND: print the stage and its command; run it (unless --dry-run) with its output in $OUT/NAME.log.
stage() {
  local name="$1" cmd="$2" log="$OUT/${1// /_}.log"
  echo "# $name"
  echo "$cmd"
  [ "$DRY_RUN" = 1 ] && return 0
  local start=$SECONDS
  if timeout "$STAGE_TIMEOUT" bash -c "$cmd" > "$log" 2>&1; then
    echo "ok $((SECONDS - start))s" > "$OUT/${1// /_}.status"
  else
    echo "FAIL $((SECONDS - start))s" > "$OUT/${1// /_}.status"
    tail -n 20 "$log"
  fi
}

[ "$DRY_RUN" = 1 ] || mkdir -p "$OUT"
if [ "$INSTALL" = 1 ]; then
  stage "install" "python3 -m venv $VENV && $PY -m pip install -q --upgrade pip && $PY -m pip install -q -e '.[test]' 'jax[cuda12]==$JAX_VERSION'"
fi
stage "devices" "$PY -c 'import jax; print(jax.device_count(), \"GPUs:\", jax.devices()); assert jax.default_backend() == \"gpu\", jax.default_backend()'"
stage "parity" "$PY -m pytest tests/model/test_hf_parity.py -q -p no:cacheprovider"
stage "attention" "$PY -m pytest tests/model/test_attention_impl.py -q -rs -p no:cacheprovider"

# The short SFT: a tiny Qwen3 on the quick pipeline's expert trajectories with its tokenizer (the stages up to
# `tokenizer`; vocab_size is the quick policy's), once per attention implementation, its weights and batch split
# over every local GPU (mesh fsdp = -1: all of them; 8 rows divide 1, 2, 4 or 8 GPUs).
SFT_RECIPE="$OUT/sft.yaml"
stage "sft data" "$JS pipeline --quick --until tokenizer --out $OUT/pipeline --no-progress && cat > $SFT_RECIPE <<'EOF'
name: gpu_check_sft
model: {model_type: qwen3, vocab_size: 2048, hidden_size: 256, intermediate_size: 704, num_layers: 4,
        num_heads: 4, num_kv_heads: 2, head_dim: 64}
data: {seq_len: 2048, batch_size: 8, seed: 0}
optimizer: {lr: 2.0e-3, min_lr: 2.0e-4, warmup_steps: 5}
train: {train_files: [$OUT/pipeline/expert/trajectories.jsonl], tokenizer: $OUT/pipeline/tokenizer, steps: 60,
        log_every: 10, checkpoint_every: 1000, chunk_size: 512}
EOF"
stage "sft xla" "$JS sft --config $SFT_RECIPE --set mesh.fsdp=-1 --set train.out_dir=$OUT/sft_xla \
--set model.attention_impl=xla"
stage "sft cudnn" "$JS sft --config $SFT_RECIPE --set mesh.fsdp=-1 --set train.out_dir=$OUT/sft_cudnn \
--set model.attention_impl=cudnn --set model.compute_dtype=bfloat16"
# A short RL run (rollouts by the engine, the GRPO update) of the toy colour task on every local GPU.
stage "rl toy" "$PY -c \"from jaxseeker.train.rl.bench import write_toy; write_toy('$OUT/rl_toy')\""
stage "rl" "$JS rl --config rl_tiny --set mesh.fsdp=-1 --set model.hf_path=$OUT/rl_toy/policy \
--set 'rl.questions=[$OUT/rl_toy/questions.jsonl]' --set rl.steps=2 --set rl.out_dir=$OUT/rl --no-progress"
stage "bench generate" "$JS bench generate --json"
stage "bench sft" "$JS bench sft"

echo "# table"
[ "$DRY_RUN" = 1 ] && exit 0
"$PY" - "$OUT" <<'EOF'
import json, re, sys
from pathlib import Path

out = Path(sys.argv[1])
rows = []

def status(name):
    path = out / f"{name.replace(' ', '_')}.status"
    return path.read_text().strip() if path.exists() else "skipped"

def pytest_line(name):
    log = out / f"{name}.log"
    lines = [l for l in log.read_text().splitlines() if re.search(r"\d+ (passed|failed|skipped)", l)] if log.exists() else []
    return lines[-1].strip("= ") if lines else ""

for name in ("install", "devices"):
    rows.append((name, status(name), (out / f"{name}.log").read_text().strip().splitlines()[-1][:90]
                 if name == "devices" and (out / "devices.log").exists() else ""))
rows.append(("parity (HF, f32)", status("parity"), pytest_line("parity")))
rows.append(("attention impls", status("attention"), pytest_line("attention")))
for impl in ("xla", "cudnn"):
    summary = out / f"sft_{impl}" / "summary.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        detail = f"final loss {s['final_loss']:.4f}, {s['trained_tokens'] / s['wall_s']:.0f} trained tok/s (incl. compile)"
    else:
        detail = "no summary"
    rows.append((f"sft {impl}", status(f"sft {impl}"), detail))
rl = out / "rl" / "summary.json"
rl_detail = (lambda s: f"{s['steps']} steps, reward {s['first_reward']:.3f} -> {s['final_reward']:.3f}, "
             f"{s['mean_step_s']:.1f} s/step (incl. compile)")(json.loads(rl.read_text())) if rl.exists() else "no summary"
rows.append(("rl", status("rl"), rl_detail))
gen = out / "bench_generate.log"
gen_json = [l for l in gen.read_text().splitlines() if l.startswith("{")] if gen.exists() else []
gen_detail = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in json.loads(gen_json[-1]).items() if "tok" in k or "ratio" in k) if gen_json else ""
rows.append(("bench generate", status("bench generate"), gen_detail))
sft_log = out / "bench_sft.log"
sft_lines = [l.strip() for l in sft_log.read_text().splitlines() if l.startswith(("jaxseeker", "HF+torch", "ratio"))] \
    if sft_log.exists() else []
rows.append(("bench sft", status("bench sft"), " | ".join(sft_lines)))
width = max(len(r[0]) for r in rows)
print(f"\n{'stage':<{width}}  {'status':<10}  detail")
for name, st, detail in rows:
    print(f"{name:<{width}}  {st:<10}  {detail}")
EOF
