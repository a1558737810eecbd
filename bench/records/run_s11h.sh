#!/usr/bin/env bash
# Session 11, call 8: the slice kernels at 8 lanes an edge in 128-thread blocks (cuda/edge_attention_sl.cu: f32 hidden 64, S lanes an edge)
# with the locality schedule. test_edge_attention (with slice_kernels_match_host_f64); memcheck and
# racecheck on the slice and schedule tests; eager PyTorch for the graphs; bench_edge_ops every
# config at 100k / 400k, the hid 64 configs again with TIGA_EA_SLICE=0 (the warp-per-row kernels)
# and ncu per-kernel time at 400k, hid 64, H 1 and H 4. Carry ["gpu-carry"].
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
grep -h -B2 -A6 "Assertion Failed\|\[FAIL\]" $o/test_ea.log | head -40
D=/tmp/s11h; mkdir -p $D
timeout $(tl 150) python3 bench/edge_attention_torch.py --sizes 100k,400k --no-compile --dump $D > $o/ea_torch.log 2>&1; echo "edge_attention_torch (eager) rc=$?"
echo "elapsed ${SECONDS}s"; pack
B=$R/bench/bench_edge_ops
for s in 100k 400k; do
  timeout $(tl 60) $B --graph $D/radius_$s.bin --providers fused > $o/ea_ops_$s.log 2>&1; echo "bench_edge_ops $s rc=$?"; grep -v '^{' $o/ea_ops_$s.log | grep fused
  for v in 0; do
    for k in 1 3; do
      TIGA_EA_SLICE=$v timeout $(tl 30) $B --graph $D/radius_$s.bin --providers fused --only $k > $o/ea_ops_${s}_sl${v}_$k.log 2>&1; echo "  TIGA_EA_SLICE=$v rc=$? $(grep -v '^{' $o/ea_ops_${s}_sl${v}_$k.log | grep fused)"
    done
  done
done
echo "elapsed ${SECONDS}s"; pack
for k in 1 3; do
  timeout $(tl 60) ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active --csv $B --graph $D/radius_400k.bin --providers fused --only $k --reps 1 --warmup 0 > $o/ncu_400k_$k.csv 2> $o/ncu_400k_$k.err
  echo "ncu 400k cfg $k rc=$?:" $(python3 -c "
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]; h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value'); ui=h.index('Metric Unit'); mi=h.index('Metric Name')
t=collections.defaultdict(float); c=collections.Counter(); ex={}
for r in rows[1:]:
    k=r[ki].split('(')[0].split('::')[-1].split('<')[0][:24]
    v=float(r[vi].replace(',',''))
    if r[mi]=='gpu__time_duration.sum':
        v=v/1e3 if r[ui] in ('ns','nsecond') else v; t[k]+=v; c[k]+=1
    else: ex.setdefault(k,{})[r[mi].split('__')[1][:12]]=v
n=max([c[k] for k in c if k.startswith('k_fwd')] or [1])
print(' '.join(f'{k} {t[k]/n:.1f}us' + (f'({int(ex[k].get(\"registers_pe\",0))}r,{ex[k].get(\"warps_active\",0):.0f}%occ)' if k.startswith('k_') and k in ex else '') for k in sorted(t, key=lambda k:-t[k])[:8]))
" $o/ncu_400k_$k.csv)
done
echo "elapsed ${SECONDS}s"; pack
(cd $R/tests
for tool in memcheck racecheck; do
  extra=""; [ $tool = memcheck ] && extra="--leak-check full"
  for t in slice_kernels_match_host_f64 locality_schedule_same_results; do
    timeout $(tl 90) compute-sanitizer --tool $tool $extra --show-backtrace no --print-limit 20 --error-exitcode 99 ./test_edge_attention --jobs 1 --filter "edge_attention_cuda/$t" > $o/${tool}_$t.log 2>&1
    echo "$tool $t rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/${tool}_$t.log | tail -1) $(grep -h Synthesis $o/${tool}_$t.log | tail -1)"
  done
done)
echo "elapsed ${SECONDS}s"; pack
