"""PyTorch reference for the char-level transformer training step (nanoGPT shakespeare-char config),
timed on the same GPU in the same run as tiga's train_charlm benchmark.

Modes: f32 eager, bf16 autocast, bf16 autocast + torch.compile. One AdamW step per iteration
(forward, backward, clip, step), CUDA events, median over timed steps after warm-up.
Output lines: "train_torch mode=<m> ms_per_step=<x> tokens_per_s=<y>".
"""
import argparse
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d, bias=False)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.ln2 = nn.LayerNorm(d, bias=False)
        self.fc = nn.Linear(d, 4 * d, bias=False)
        self.fc2 = nn.Linear(4 * d, d, bias=False)
        self.h, self.p = h, dropout
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.p if self.training else 0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.drop(self.proj(y))
        x = x + self.drop(self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, ctx, d, h, layers, dropout):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(d, h, dropout) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d, bias=False)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight
        # nanoGPT's initialisation (as examples/charlm.c): N(0, 0.02), residual projections N(0, 0.02/sqrt(2L))
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, tgt):
        B, T = idx.shape
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


def full_run(a):
    """nanoGPT shakespeare-char, end to end: lr 1e-3 warmup 100 cosine to 1e-4 over the steps, eval every 250
    steps on 200 batches of each split, bf16 autocast + torch.compile."""
    torch.manual_seed(1337)
    data = open(a.full, "rb").read()
    chars = sorted(set(data))
    lut = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([lut[c] for c in data], dtype=torch.long)
    n = int(0.9 * len(ids))
    split = {"train": ids[:n].cuda(), "val": ids[n:].cuda()}
    vocab, ctx, d, h, L, B = len(chars), 256, 384, 6, 6, 64
    model = GPT(vocab, ctx, d, h, L, 0.2).cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), fused=True)
    fwd = torch.compile(model)

    def batch(s):
        d_ = split[s]
        ix = torch.randint(len(d_) - ctx - 1, (B,), device="cuda")
        off = torch.arange(ctx, device="cuda")
        return d_[ix[:, None] + off], d_[ix[:, None] + off + 1]

    def lr_at(it):
        if it < 100:
            return 1e-3 * (it + 1) / 101
        r = (it - 100) / (a.steps - 100)
        return 1e-4 + 0.5 * (1 + math.cos(math.pi * r)) * (1e-3 - 1e-4)

    best = float("inf")
    for it in range(a.steps + 1):
        if it % 250 == 0 or it == a.steps:
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                ls = {s: sum(fwd(*batch(s)).item() for _ in range(200)) / 200 for s in ("train", "val")}
            model.train()
            best = min(best, ls["val"])
            print(f"torch_full step {it} train {ls['train']:.4f} val {ls['val']:.4f} best {best:.4f}", flush=True)
        if it == a.steps:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        x, y = batch("train")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--modes", default="f32,bf16,bf16_compile")
    ap.add_argument("--full", metavar="TEXT", help="train on TEXT (90/10 split) with nanoGPT's schedule and print "
                    "the validation curve instead of timing")
    a = ap.parse_args()
    if a.full:
        return full_run(a)
    torch.manual_seed(0)
    vocab, ctx, d, h, L, B = 65, 256, 384, 6, 6, 64
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for mode in a.modes.split(","):
        model = GPT(vocab, ctx, d, h, L, 0.2).to(dev)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        nodecay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99), fused=True)
        fwd = torch.compile(model) if mode.endswith("compile") else model
        idxs = [torch.randint(0, vocab, (B, ctx), device=dev) for _ in range(8)]
        tgts = [torch.randint(0, vocab, (B, ctx), device=dev) for _ in range(8)]
        times = []
        for it in range(a.warmup + a.steps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode.startswith("bf16")):
                loss = fwd(idxs[it % 8], tgts[it % 8])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            e.record()
            torch.cuda.synchronize()
            if it >= a.warmup:
                times.append(s.elapsed_time(e))
        ms = statistics.median(times)
        print(f"train_torch mode={mode} ms_per_step={ms:.3f} tokens_per_s={B * ctx / ms * 1e3:.0f} loss={loss.item():.4f}",
              flush=True)


if __name__ == "__main__":
    main()
