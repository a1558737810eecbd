#!/usr/bin/env bash
# Issue 17 (tg_comm, NCCL data parallel): what one device call can tell.
#   any GPU count: test_comm (hook, 1-rank identity, deadline; the 2-rank test runs at >= 2 GPUs),
#                  train_charlm --gpus 1 against the same run without the flag (same losses);
#   >= 2 GPUs:     --gpus 2 --batch 32 vs --gpus 1 --batch 64 (same global batch: eval loss curves
#                  compared), weak scaling of a GPT-2-small-sized char model (12 layers, d 768,
#                  12 heads, context 1024, bf16, batch 8 per GPU) and of the default char model at
#                  1, 2 (4, 8 when visible) GPUs: efficiency = ms/step at 1 GPU / ms/step at N.
# Usage: bench/records/run_s7_nccl.sh [BUILD]  (BUILD: a gpu-prep build folder, default
# build-gpu-run, unpacked from gpu-carry/build-gpu-run.tar.xz when missing). Logs under $OUT/logs.
# Ends with a table and "RESULT: PASS" or "RESULT: FAIL (...)"; exit status 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
R=${1:-build-gpu-run}
if [ ! -d "$R" ] && [ -f gpu-carry/build-gpu-run.tar.xz ]; then tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1; fi
[ -x "$R/examples/train_charlm" ] || { echo "FAIL: no $R/examples/train_charlm"; exit 1; }
R=$(cd "$R" && pwd)
export LD_LIBRARY_PATH="$R/rt:$R:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
o=${OUT:-/tmp/run_s7_nccl}/logs
mkdir -p "$o"
END=${END_S:-570}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=5; echo $l; }
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "GPUs visible: $NG"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null
[ "$NG" -ge 2 ] && nvidia-smi topo -m 2>/dev/null | head -12
echo "libnccl: $(ls /usr/local/cuda*/lib*/libnccl.so.2 2>/dev/null | tr '\n' ' ') $(ldconfig -p 2>/dev/null | grep -c libnccl) in ldconfig"
fails=()
table=()
TC=$R/examples/train_charlm
DATA="--data examples/data/input.txt"

# ---- 1. test_comm
(cd "$R/tests" && timeout $(tl 300) ./test_comm --jobs 1 --verbose) > "$o/test_comm.log" 2>&1
rc=$?
grep -E '^\[(PASS|FAIL|SKIP)\]|Synthesis' "$o/test_comm.log" | cut -c1-200
grep -B2 -A6 -E '^\[----\]' "$o/test_comm.log" | head -40
[ $rc -eq 0 ] || fails+=("test_comm rc=$rc")
table+=("test_comm: rc=$rc, $(grep -c '^\[PASS\]' "$o/test_comm.log") passed, $(grep -c '^\[SKIP\]' "$o/test_comm.log") skipped")

# loss.csv column 3 (loss) of train and eval rows
losses() { awk -F, 'NR > 1 {print $1, $2, $3}' "$1/loss.csv"; }
# ms/step of the last step line of a log
msstep() { grep -E '^step +[0-9]+/' "$1" | tail -1 | sed -E 's/.*\| +([0-9.]+) ms\/step.*/\1/'; }

# ---- 2. --gpus 1 is today's run
ch="--device cuda --steps 40 --eval-interval 20 --eval-iters 5 --log-interval 5 --sample-chars 0 $DATA"
timeout $(tl 120) $TC $ch --out "$o/g_none" > "$o/g_none.log" 2>&1; r0=$?
timeout $(tl 120) $TC $ch --gpus 1 --out "$o/g_one" > "$o/g_one.log" 2>&1; r1=$?
if [ $r0 -ne 0 ] || [ $r1 -ne 0 ]; then
  fails+=("train_charlm --gpus 1: rc $r0 / $r1")
  tail -5 "$o/g_none.log" "$o/g_one.log"
else
  d=$(paste -d' ' <(losses "$o/g_none") <(losses "$o/g_one") | awk '{d = $3 - $6; if (d < 0) d = -d; if (d > m) m = d} END {printf "%.6f", m + 0}')
  same=$(cmp -s <(losses "$o/g_none") <(losses "$o/g_one") && echo identical || echo "max |diff| $d")
  table+=("--gpus 1 vs no flag (40 steps, default config): losses $same")
  awk -v d="$d" 'BEGIN {exit !(d > 0.01)}' && fails+=("--gpus 1 differs from the single-GPU run by $d")
fi

if [ "$NG" -ge 2 ]; then
  # ---- 3. same global batch: 2 x 32 vs 1 x 64 (default shakespeare_char config, bf16)
  lc="--device cuda --steps 300 --eval-interval 50 --eval-iters 40 --log-interval 50 --sample-chars 0 $DATA"
  timeout $(tl 200) $TC $lc --gpus 1 --batch 64 --out "$o/lc1" > "$o/lc1.log" 2>&1; a=$?
  timeout $(tl 200) $TC $lc --gpus 2 --batch 32 --out "$o/lc2" > "$o/lc2.log" 2>&1; b=$?
  if [ $a -ne 0 ] || [ $b -ne 0 ]; then
    fails+=("loss-curve runs: rc $a / $b")
    tail -5 "$o/lc1.log" "$o/lc2.log" "$o/lc2/rank1.log" 2>/dev/null
  else
    echo "step  val(1 GPU x 64)  val(2 GPUs x 32)"
    paste -d' ' <(losses "$o/lc1" | awk '$2 == "eval_val"') <(losses "$o/lc2" | awk '$2 == "eval_val"') |
      awk '{printf "%5d  %.4f          %.4f\n", $1, $3, $6}'
    d=$(paste -d' ' <(losses "$o/lc1" | awk '$2 == "eval_val"') <(losses "$o/lc2" | awk '$2 == "eval_val"') |
      tail -1 | awk '{d = $3 - $6; if (d < 0) d = -d; printf "%.4f", d}')
    table+=("same global batch 64, 300 steps: final val loss |1 GPU - 2 GPUs| = $d (target <= 0.05)")
    awk -v d="$d" 'BEGIN {exit !(d > 0.05)}' && fails+=("loss curves differ by $d at the end")
  fi
fi

# ---- 4. weak scaling (1 GPU always: the baseline; more when visible)
g2="--device cuda --layers 12 --d-model 768 --heads 12 --context 1024 --dtype bf16 --batch 8 --dropout 0 --attn-dropout 0"
chm="--device cuda --batch 64"
common="--steps 40 --log-interval 10 --eval-interval 1000000 --eval-iters 1 --sample-chars 0 $DATA"
for model in gpt2s char; do
  [ $model = gpt2s ] && flags="$g2" || flags="$chm"
  base=""
  for n in 1 2 4 8; do
    [ $n -gt "$NG" ] && break
    [ $((END - SECONDS)) -lt 40 ] && { table+=("$model x$n: skipped (time)"); break; }
    timeout $(tl 150) $TC $flags $common --gpus $n --out "$o/ws_${model}_$n" > "$o/ws_${model}_$n.log" 2>&1; rc=$?
    ms=$(msstep "$o/ws_${model}_$n.log")
    if [ $rc -ne 0 ] || [ -z "$ms" ]; then
      fails+=("weak scaling $model x$n rc=$rc")
      tail -4 "$o/ws_${model}_$n.log"
      continue
    fi
    [ $n -eq 1 ] && base=$ms
    eff=$([ -n "$base" ] && awk -v a="$base" -v b="$ms" 'BEGIN {printf "%.1f%%", 100 * a / b}' || echo "?")
    tok=$(grep -E '^step +[0-9]+/' "$o/ws_${model}_$n.log" | tail -1 | sed -E 's/.*\| +([0-9.]+) tok\/s.*/\1/')
    table+=("weak scaling $model: $n GPU(s): $ms ms/step, $tok tok/s (global), efficiency $eff")
  done
done
grep -E '^model:' "$o/ws_gpt2s_1.log" 2>/dev/null | head -1

echo "==== run_s7_nccl summary (elapsed ${SECONDS}s)"
for l in "${table[@]}"; do echo "  $l"; done
rm -rf "$o"/g_none "$o"/g_one "$o"/lc1 "$o"/lc2 "$o"/ws_*/ 2>/dev/null
if [ ${#fails[@]} -eq 0 ]; then
  echo "RESULT: PASS"
else
  printf 'FAIL: %s\n' "${fails[@]}"
  echo "RESULT: FAIL (${#fails[@]})"
  exit 1
fi
