"""What each compute-side change is worth on CPU workloads, measured the way
tuneloop decides: baseline and variant alternately, each run a fresh process,
the median of the paired ratios (variant / baseline samples/sec).

Two models: the compute_bound fixture's small conv net (batch 32 of 3x32x32,
SGD with momentum) and a small transformer encoder (batch 16 of 64 tokens,
AdamW), each cycling through 8 batches generated in memory. Each run seeds
itself, times forward + backward + optimizer step on batches already in
memory (compute-bound by construction), and records the first 5 losses, so
the table also shows how far each change moves them.

    python bench/compute_gains.py [--pairs 5] [--out bench/compute_gains.jsonl]

Only the standard library and torch. The figures in bench/RESULTS.md were
taken on a shared 2-core box (see there).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

VARIANTS = {
    # name: (what differs from the baseline, which models it applies to)
    "num_threads 1 -> all": ("threads", ("conv", "transformer")),
    "channels_last": ("channels_last", ("conv",)),
    "foreach_optimizer": ("foreach", ("conv", "transformer")),
    "fused_optimizer": ("fused", ("conv", "transformer")),
    "autocast bf16": ("autocast", ("conv", "transformer")),
    "torch.compile": ("compile", ("conv", "transformer")),
}


def child(model_name, change, steps, warmup):
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    # One intra-op thread, as the fixture sets it, except in the num_threads
    # variant (torch's default: all cores). On a box shared with other jobs
    # one thread is also the steadier figure to compare the others at.
    if change != "all-threads":
        torch.set_num_threads(1)
    if model_name == "conv":
        sys.path.insert(0, "tests/fixtures/compute_bound")
        from train import SmallConvNet

        model = SmallConvNet()
        batches = [(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))) for _ in range(8)]

        def make_opt(params, **kw):
            return torch.optim.SGD(params, lr=0.05, momentum=0.9, **kw)
    else:
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                           batch_first=True)
        model = nn.Sequential(nn.Embedding(1000, 128), nn.TransformerEncoder(layer, num_layers=2),
                              nn.Flatten(), nn.Linear(64 * 128, 10))
        batches = [(torch.randint(0, 1000, (16, 64)), torch.randint(0, 10, (16,)))
                   for _ in range(8)]

        def make_opt(params, **kw):
            return torch.optim.AdamW(params, lr=1e-4, **kw)
    if change == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    if change == "autocast":
        model.forward = torch.autocast("cpu", dtype=torch.bfloat16)(model.forward)
    if change == "compile":
        model = torch.compile(model)
    kw = {"foreach": {"foreach": True}, "fused": {"fused": True}}.get(change, {})
    opt = make_opt(model.parameters(), **kw)
    losses = []
    t0 = None
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        x, y = batches[i % len(batches)]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if len(losses) < 5:
            losses.append(loss.item())
    wall = time.perf_counter() - t0
    print(json.dumps({"sps": steps * x.shape[0] / wall, "losses": losses}))


def run(model_name, change, steps, warmup):
    out = subprocess.run([sys.executable, __file__, "--child", model_name, change,
                          str(steps), str(warmup)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", default="bench/compute_gains.jsonl")
    ap.add_argument("--only", default="", help="comma-separated variant names")
    args = ap.parse_args()
    rows = []
    with open(args.out, "w") as f:
        for name, (change, models) in VARIANTS.items():
            if args.only and name not in args.only.split(","):
                continue
            for model_name in models:
                base_change = "none"
                var_change = "all-threads" if change == "threads" else change
                # compile pays its compilation in the warm-up steps.
                warmup = args.warmup * 4 if change == "compile" else args.warmup
                pairs = []
                for k in range(args.pairs):
                    order = [("base", base_change), ("var", var_change)]
                    if k % 2:
                        order.reverse()
                    got = {role: run(model_name, c, args.steps, warmup) for role, c in order}
                    pairs.append(got)
                    row = {"variant": name, "model": model_name, "pair": k, **got}
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                ratios = [p["var"]["sps"] / p["base"]["sps"] for p in pairs]
                drift = max(abs(a - b) / abs(b) for a, b in
                            zip(pairs[0]["var"]["losses"], pairs[0]["base"]["losses"]))
                row = (name, model_name, statistics.median(p["base"]["sps"] for p in pairs),
                       statistics.median(p["var"]["sps"] for p in pairs),
                       statistics.median(ratios), min(ratios), max(ratios), drift)
                rows.append(row)
                print("| %s | %s | %.1f | %.1f | x%.2f | [%.2f, %.2f] | %.4f%% |"
                      % (row[:7] + (row[7] * 100,)), flush=True)


if __name__ == "__main__":
    main()
