#!/usr/bin/env python3
"""PyTorch baselines for bench_attention --bench: the same cases, FLOP counts and output format.

  python3 bench/attention_torch.py [--no-flex] [--no-sdpa] [substring]   one RESULT line per case and backend
  python3 bench/attention_torch.py --join LOG...                          side-by-side table of RESULT lines

Layout [B, N, H, D] viewed as [B, H, N, D] (as tiga stores it); CUDA events, 2 warm-ups, median of
5..50 repetitions. FLOPs: forward 4*B*H*pairs*D with pairs = N^2 (dense), N^2/2 (causal, the
FlashAttention convention) or the allowed pairs (mask, varlen); forward+backward 3.5x forward.
Backends: SDPA FLASH / EFFICIENT / CUDNN pinned with torch.nn.attention.sdpa_kernel, and
flex_attention through torch.compile (BlockMask; document mask for varlen).
"""
import math
import re
import statistics
import sys

M64 = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def cases():
    v = []
    for D, N, B, H in [(64, 1024, 32, 32), (64, 4096, 8, 32), (64, 16384, 2, 32),
                       (128, 1024, 32, 16), (128, 4096, 8, 16), (128, 16384, 2, 16)]:
        for causal in (0, 1):
            v.append(("causal" if causal else "dense", "f16", B, H, N, D))
    for D in (64, 128):
        for causal in (0, 1):
            v.append(("causal" if causal else "dense", "bf16", 8, 32 if D == 64 else 16, 4096, D))
    v.append(("causal", "f16", 4, 16, 4096, 64))
    v.append(("mask50", "f16", 4, 16, 4096, 64))
    v.append(("mask50", "f16", 4, 16, 4096, 128))
    v.append(("varlen", "f16", 1, 16, 0, 64))
    return v


def bench_ms(torch, fn, budget_ms):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); fn(); b.record(); b.synchronize()
    one = a.elapsed_time(b)
    reps = max(5, min(50, int(budget_ms / max(one, 1e-3))))
    ts = []
    for _ in range(reps):
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def run(argv):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    flex_ok = "--no-flex" not in argv
    sdpa_ok = "--no-sdpa" not in argv
    filt = [a for a in argv if not a.startswith("--")]
    filt = filt[0] if filt else ""
    if flex_ok:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    dev = "cuda"
    for name, dts, B, H, N, D in cases():
        ident = f"{name} {dts} D={D} N={N}"
        if filt not in ident:
            continue
        dt = torch.float16 if dts == "f16" else torch.bfloat16
        kind = name
        lens = None
        if kind == "varlen":
            lens = [64 + splitmix64(12345 + s) % 3968 for s in range(32)]
            N = sum(lens)
            pairs = sum(L * (L + 1) / 2 for L in lens)
        elif kind == "mask50":
            nb = N // 128
            tab = torch.zeros(B, nb, nb, dtype=torch.bool)
            for b in range(B):
                for bi in range(nb):
                    for bj in range(nb):
                        hsh = splitmix64(((b * 1024 + bi) * 1024 + bj) & M64)
                        tab[b, bi, bj] = bi == bj or (hsh >> 11) * 2.0 ** -53 < 0.5
            pairs = float(tab.sum()) * 128 * 128 / B
            tab = tab.to(dev)
        elif kind == "causal":
            pairs = N * N / 2
        else:
            pairs = N * N
        fwd_flop = 4.0 * B * H * pairs * D
        fb_flop = 3.5 * fwd_flop
        g = torch.Generator(device=dev).manual_seed(1)
        base = [torch.randn(B, N, H, D, device=dev, dtype=dt, generator=g).requires_grad_() for _ in range(3)]
        q, k, v = (x.transpose(1, 2) for x in base)
        dout = torch.randn(B, H, N, D, device=dev, dtype=dt, generator=g)

        def report(impl, f):
            try:
                tf = bench_ms(torch, lambda: f(False), 300)
                tb = bench_ms(torch, lambda: f(True), 600)
                print(f"RESULT impl={impl} case={name} dtype={dts} B={B} H={H} N={N} D={D} fwd_ms={tf:.4f} "
                      f"fwd_tflops={fwd_flop / tf * 1e-9:.1f} fwdbwd_ms={tb:.4f} fwdbwd_tflops={fb_flop / tb * 1e-9:.1f}",
                      flush=True)
            except Exception as e:  # a backend that does not take this case
                msg = re.sub(r"\s+", " ", str(e))[:160]
                print(f"RESULT impl={impl} case={name} dtype={dts} B={B} H={H} N={N} D={D} error={msg}", flush=True)
            torch.cuda.empty_cache()

        def step(fn, bwd):
            if not bwd:
                with torch.no_grad():
                    fn()
                return
            out = fn()
            torch.autograd.grad(out, base, dout)

        if sdpa_ok and kind in ("dense", "causal"):
            for impl, be in (("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION),
                             ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION)):
                def f(bwd, be=be):
                    with sdpa_kernel(be):
                        step(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=kind == "causal"), bwd)
                report(impl, f)
        if sdpa_ok and kind == "mask50":
            bool_mask = tab.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, None]  # [B, 1, N, N]
            def f(bwd):
                with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                    step(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask), bwd)
            report("sdpa-efficient", f)
            del bool_mask
        if flex_ok and (kind in ("mask50", "varlen") or (kind == "causal" and B == 4)):
            try:
                qc, kc, vc = (x.detach().transpose(1, 2).contiguous().requires_grad_() for x in base)
                if kind == "causal":
                    def mm(b, h, qi, ki):
                        return qi >= ki
                    bm = create_block_mask(mm, None, None, N, N, device=dev)
                elif kind == "mask50":
                    def mm(b, h, qi, ki):
                        return tab[b, qi // 128, ki // 128]
                    bm = create_block_mask(mm, B, None, N, N, device=dev, BLOCK_SIZE=128)
                else:
                    doc = torch.repeat_interleave(torch.arange(len(lens), device=dev), torch.tensor(lens, device=dev))
                    def mm(b, h, qi, ki):
                        return (doc[qi] == doc[ki]) & (qi >= ki)
                    bm = create_block_mask(mm, None, None, N, N, device=dev)

                def f(bwd):
                    if not bwd:
                        with torch.no_grad():
                            flex(qc, kc, vc, block_mask=bm)
                        return
                    out = flex(qc, kc, vc, block_mask=bm)
                    torch.autograd.grad(out, (qc, kc, vc), dout)
                report("flex", f)
            except Exception as e:
                msg = re.sub(r"\s+", " ", str(e))[:160]
                print(f"RESULT impl=flex case={name} dtype={dts} B={B} H={H} N={N} D={D} error={msg}", flush=True)


def join(paths):
    rows, impls = {}, []
    for p in paths:
        for line in open(p):
            if not line.startswith("RESULT "):
                continue
            kv = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
            key = f"{kv['case']} {kv['dtype']} B={kv['B']} H={kv['H']} N={kv['N']} D={kv['D']}"
            if kv["impl"] not in impls:
                impls.append(kv["impl"])
            rows.setdefault(key, {})[kv["impl"]] = (kv.get("fwd_tflops", "err"), kv.get("fwdbwd_tflops", "err"))
    short = {"tiga": "tiga", "sdpa-flash": "FA2", "sdpa-efficient": "eff", "sdpa-cudnn": "cuDNN", "flex": "flex"}
    print("TFLOP/s fwd | fwd+bwd")
    print(f"{'case':<40}" + "".join(f"{short.get(i, i):>14}" for i in impls))
    for key, r in rows.items():
        print(f"{key:<40}" + "".join(f"{(r[i][0] + '|' + r[i][1]) if i in r else '-':>14}" for i in impls))


if __name__ == "__main__":
    if "--join" in sys.argv:
        join([a for a in sys.argv[1:] if a != "--join"])
    else:
        run(sys.argv[1:])
