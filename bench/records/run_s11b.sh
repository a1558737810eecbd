#!/usr/bin/env bash
# Session 11, call 2: the lane kernels' gather overlap (walk<PF> in cuda/edge_attention_ln.cu:
# TIGA_EA_GATHER=1 none, 2 L1 prefetch, 3 register double buffer; the build's default is 3) with the
# locality schedule on. test_edge_attention; the graphs from eager PyTorch (no compile); then
# bench_edge_ops hid 16 (H 1, H 4) at 100k / 400k per variant; ncu per-kernel time at 400k H 1 and
# H 4 per variant. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-560}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
(cd $R/tests && timeout $(tl 150) ./test_edge_attention --jobs 4 > $o/test_ea.log 2>&1; echo "test_edge_attention rc=$? $(grep -h Synthesis $o/test_ea.log | tail -1)")
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -30
D=/tmp/s11b; mkdir -p $D
timeout $(tl 150) python3 bench/edge_attention_torch.py --sizes 100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager) rc=$?"
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  for gv in 1 2 3; do
    for k in 0 2; do
      TIGA_EA_GATHER=$gv timeout $(tl 30) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ea_ops_${s}_g${gv}_$k.log 2>&1; echo "$s TIGA_EA_GATHER=$gv rc=$? $(grep -v '^{' $o/ea_ops_${s}_g${gv}_$k.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for k in 0 2; do
  for gv in 1 2 3; do
    TIGA_EA_GATHER=$gv timeout $(tl 60) ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_400k.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_400k_${k}_g$gv.csv 2> $o/ncu_400k_${k}_g$gv.err
    echo "ncu 400k cfg $k GATHER=$gv rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max([c[k] for k in c if k.startswith('k_fwd')] or [1])
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:5]))
" $o/ncu_400k_${k}_g$gv.csv)
  done
done
echo "elapsed ${SECONDS}s"; pack
