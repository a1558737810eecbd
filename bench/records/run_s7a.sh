#!/usr/bin/env bash
# Session 7, call 1 (the build of HEAD 628a8d2 from session 6): where a GAT step's device time goes
# (nsys timeline, else ncu kernel times), the anomaly-mode cost on the char model with the check
# batches limited by bytes (in order), the edge-attention kernel split (fwd / bwd), and the whole
# GPU suite under compute-sanitizer memcheck, racecheck and initcheck. Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-570}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
# sanitizers in the background (12 jobs at once); the profiles beside them use little
(bash bench/records/sanitize_all.sh $R $o/san 11 420 > $o/san_all.log 2>&1; echo done > $o/san_done) &
which nsys ncu || true
if which nsys > /dev/null 2>&1; then
  timeout $(tl 60) nsys profile -t cuda -s none --cpuctxsw none -o $OUT/gat $R/examples/train_gat --device cuda --attention fused --seeds 1 --epochs 40 --data examples/data/cora --out $o/gatn --quiet > $o/nsys_gat.log 2>&1; echo "nsys gat rc=$?"
  timeout $(tl 60) nsys stats -r cuda_gpu_trace -f csv -o $OUT/gat $OUT/gat.nsys-rep > /dev/null 2>&1; echo "nsys stats rc=$?"
  timeout $(tl 60) nsys profile -t cuda -s none --cpuctxsw none -o $OUT/cf $R/examples/train_charlm --device cuda --dtype bf16 --steps 12 --eval-interval 100000 --eval-iters 1 --log-interval 4 --sample-chars 0 --check-finite 1 --out $o/ch --data examples/data/input.txt > $o/nsys_cf.log 2>&1; echo "nsys charlm rc=$?"
  timeout $(tl 60) nsys stats -r cuda_gpu_trace -f csv -o $OUT/cf $OUT/cf.nsys-rep > /dev/null 2>&1; echo "nsys stats rc=$?"
  rm -f $OUT/*.nsys-rep $OUT/*.sqlite; xz -T4 $OUT/*.csv 2>/dev/null
else
  timeout $(tl 90) ncu --metrics gpu__time_duration.sum --csv --launch-skip 300 --launch-count 200 $R/examples/train_gat --device cuda --attention fused --seeds 1 --epochs 6 --data examples/data/cora --out $o/gatn --quiet > $OUT/ncu_gat.csv 2> $o/ncu_gat.err; echo "ncu rc=$?"
fi
echo "elapsed ${SECONDS}s"
for v in "off" "on" "on 8388608" "on 16777216" "on 33554432"; do
  set -- $v; cf=0; [ $1 = on ] && cf=1
  env ${2:+TIGA_CHECK_FINITE_BATCH_BYTES=$2} timeout $(tl 40) $R/examples/train_charlm --device cuda --dtype bf16 --steps 120 --eval-interval 100000 --eval-iters 1 --log-interval 20 \
    --sample-chars 0 --check-finite $cf --out $o/ch --data examples/data/input.txt > "$o/charlm_$1_${2:-0}.log" 2>&1
  echo "charlm check-finite=$cf batch_bytes=${2:-default} rc=$? $(grep -E 'step +(99|119)/120' "$o/charlm_$1_${2:-0}.log" | tr '\n' ' ' | cut -c1-300)"
done
echo "elapsed ${SECONDS}s"
timeout $(tl 70) $R/bench/bench_edge_attention --bench > $o/ea_bench.log 2>&1; echo "bench_edge_attention --bench rc=$?"; tail -12 $o/ea_bench.log
echo "elapsed ${SECONDS}s"
while [ ! -f $o/san_done ] && [ $SECONDS -lt $END ]; do sleep 5; done
cat $o/san/summary.txt | sort | awk '{print}' | cut -c1-230
tail -1 $o/san_all.log
rm -rf $o/gatn $o/ch
tar czf $OUT/logs.tgz -C $OUT logs && rm -rf $o
