#!/usr/bin/env bash
# Session 10, call 1: the lane kernels (cuda/edge_attention_ln.cu: one lane per edge, G lanes per
# row, f32 hidden 16 with no per-edge geometry left). test_edge_attention (every path: lanes by
# size, 1 / 2 lanes forced, packed, unfolded); then bench_edge_ops hid 16 H 1 / H 4 (--only 0 / 2)
# on the 100k / 400k radius graphs with TIGA_EA_LANES unset / 0 (packed) / 1 / 2 / 4 / 8; ncu's
# per-kernel time of one step at 100k and 400k (lanes by size). Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(cd $R/tests && timeout 150 ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A8 "Assertion Failed\|\[FAIL\]\|CRASH" $o/test_ea.log | head -60
echo "elapsed ${SECONDS}s"; pack
D=/tmp/s10a; mkdir -p $D
timeout 120 python3 bench/graph_torch.py --only graph --sizes 100k,400k --save-graph $D > $o/graph.log 2>&1; echo "graph rc=$?"
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  for k in 0 2; do
    for l in "" 0 1 2 4 8; do
      TIGA_EA_LANES=$l timeout 40 $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ops_${s}_${k}_$l.log 2>&1
      echo "$s cfg $k lanes '${l}' rc=$? $(grep -v '^{' $o/ops_${s}_${k}_$l.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for s in 100k 400k; do
  for k in 0 2; do
    timeout 60 ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_$s.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_${s}_$k.csv 2> $o/ncu_${s}_$k.err
    echo "ncu $s cfg $k rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0]; t[k]+=v; c[k]+=1
n=max(c['k_fwd_ln'],1)
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:9]), f'| total {sum(t.values())/n:.1f}')
" $o/ncu_${s}_$k.csv)
  done
done
echo "elapsed ${SECONDS}s"; pack
