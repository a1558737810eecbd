#!/usr/bin/env bash
# Session 12, call 3: where the hid-16 step goes now (ncu per-kernel time, 100k and 400k, H 1 and
# H 4; nsys-free: gpu__time_duration per kernel, cold caches), and the step's wall time with the
# lane counts forced (TIGA_EA_LANES=1 / 2 / 4 / 8) at 100k H 4. Carry ["gpu-carry"].
set -uo pipefail
cd "$(dirname "$0")/../.."
tar xJf gpu-carry/build-gpu-run.tar.xz || exit 1
R=$PWD/build-gpu-run
export LD_LIBRARY_PATH="$R/rt:$R:${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
o=$OUT/logs; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
END=${END_S:-300}
tl() { local l=$((END - SECONDS)); [ $l -gt $1 ] && l=$1; [ $l -lt 5 ] && l=1; echo $l; }
pack() { tar czf $OUT/logs.tgz -C $OUT logs; }
D=/tmp/s12c; mkdir -p $D
timeout $(tl 90) python3 bench/graph_torch.py --sizes 100k,400k --only graph --no-compile --save-graph $D > $o/graph.log 2>&1; echo "graph_torch rc=$?"
B=$R/bench/bench_edge_ops
for s in 100k 400k; do for k in 0 2; do
  timeout $(tl 60) ncu --metrics gpu__time_duration.sum --csv $B --graph $D/radius_$s.bin --providers fused --only $k --reps 2 --warmup 0 > $o/ncu_${s}_$k.csv 2> $o/ncu_${s}_$k.err
  echo "ncu $s cfg $k rc=$?: us per step:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit')
t=collections.defaultdict(float); c=collections.Counter()
for r in rows[1:]:
    v=float(r[vi].replace(',','')); v=v/1e3 if r[ui] in ('ns','nsecond') else v
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]; t[k]+=v; c[k]+=1
n=max([c[k] for k in c if k.startswith('k_fwd')] or [1])
print(' '.join(f'{k} {t[k]/n:.1f}' for k in sorted(t, key=lambda k:-t[k])[:14]), f'| total {sum(t.values())/n:.1f} | launches/step {sum(c.values())/n:.1f}')
" $o/ncu_${s}_$k.csv)
done; done
echo "elapsed ${SECONDS}s"; pack
for L in 1 2 4 8; do
  TIGA_EA_LANES=$L timeout $(tl 30) $B --graph $D/radius_100k.bin --providers fused --only 2 > $o/lanes_$L.log 2>&1; echo "100k H4 TIGA_EA_LANES=$L rc=$? $(grep -v '^{' $o/lanes_$L.log | grep fused)"
  TIGA_EA_LANES=$L timeout $(tl 30) $B --graph $D/radius_400k.bin --providers fused --only 2 > $o/lanes400_$L.log 2>&1; echo "400k H4 TIGA_EA_LANES=$L rc=$? $(grep -v '^{' $o/lanes400_$L.log | grep fused)"
done
echo "elapsed ${SECONDS}s"; pack
