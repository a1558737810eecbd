#!/usr/bin/env python3
"""PyTorch reference for bench_linear: the same shapes, step and output format.

One step = y = F.linear(x, W, b); loss = y.sum(); loss.backward() with x, W, b leaf tensors that
require grad (W stored [out, in] as nn.Linear does; tiga stores [in, out], same flops). Gradients
are set to None between steps (zero_grad(set_to_none=True), what a training loop does), so no
accumulation kernel runs. f32 runs in true fp32 (TF32 off), as tiga's CUBLAS_COMPUTE_32F.
Timing: CUDA events around `iters` steps after warm-up, median over `repeats`.
  ms, tflops (6 * rows * in * out flop), loss_ms (the same step without the linear: sum over a
  [rows, out] leaf and its backward) and tflops_net = flop / (ms - loss_ms).
Output, one line per case:
  linear dtype=bf16 rows=16384 in=768 out=3072 ms=.. tflops=.. loss_ms=.. tflops_net=.. impl=torch
"""
import argparse
import statistics

import torch
import torch.nn.functional as F

SHAPES = [(768, 3072), (3072, 768), (384, 1152), (1024, 4096)]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


ACCUMULATE = False


def time_steps(step, leaves, iters, repeats):
    for _ in range(3):
        step()
        for t in leaves:
            if not ACCUMULATE:
                t.grad = None
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            step()
            for t in leaves:
                if not ACCUMULATE:
                    t.grad = None
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return statistics.median(times)


def run_case(name, dtype, rows, n_in, n_out, iters, repeats):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, n_in, device="cuda", generator=gen).to(dtype).requires_grad_()
    w = (0.02 * torch.randn(n_out, n_in, device="cuda", generator=gen)).to(dtype).requires_grad_()
    b = (0.02 * torch.randn(n_out, device="cuda", generator=gen)).to(dtype).requires_grad_()

    def step():
        F.linear(x, w, b).sum().backward()

    ms = time_steps(step, (x, w, b), iters, repeats)
    y = torch.randn(rows, n_out, device="cuda", generator=gen).to(dtype).requires_grad_()

    def baseline():
        y.sum().backward()

    loss_ms = time_steps(baseline, (y,), iters, repeats)
    del x, w, b, y
    flop = 6.0 * rows * n_in * n_out
    net = ms - loss_ms if ms > loss_ms else ms
    print(f"linear dtype={name} rows={rows} in={n_in} out={n_out} ms={ms:.4f} tflops={flop / (ms * 1e-3) / 1e12:.2f} "
          f"loss_ms={loss_ms:.4f} tflops_net={flop / (net * 1e-3) / 1e12:.2f} impl=torch", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="all", choices=["all", *DTYPES])
    p.add_argument("--rows", type=int, default=16384)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--accumulate", action="store_true", help="keep .grad between steps (gradients add up)")
    a = p.parse_args()
    global ACCUMULATE
    ACCUMULATE = a.accumulate
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = ["f32", "bf16"] if a.dtype == "all" else [a.dtype]
    for name in names:
        for n_in, n_out in SHAPES:
            run_case(name, DTYPES[name], a.rows, n_in, n_out, a.iters, a.repeats)


if __name__ == "__main__":
    main()
