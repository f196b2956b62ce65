"""Runs devcheck's benchmark workloads in numpy and PyTorch and prints one table with ratios.

Usage (scripts/bench-peers.sh drives both steps; scripts/gpu-check.sh the GPU ones):
  python scripts/bench_peers.py measure OUT_JSON [--no-torch]
      times the peers at 1 and 2 threads and writes their rates to OUT_JSON
  python scripts/bench_peers.py measure-gpu OUT_JSON
      times PyTorch on cuda:0 for the `gpu_*` workloads (cuBLAS for matmul), with CUDA events
  python scripts/bench_peers.py table DEVCHECK_JSON... --peers PEERS_JSON...
      prints the table; with several rounds of each, every cell is its best round
DEVCHECK_JSON is the output of `cargo bench --bench bench -- --json`. Rates are higher-is-better
(GFLOP/s, GB/s, steps/s); a ratio above 1 means devcheck is faster than that peer. Workloads the
peers have no counterpart for (the checker, the linter) are listed with devcheck's number alone.
"""
import json
import statistics
import sys
import time


def timed(fn, budget=2.0, max_samples=15, min_sample=0.01):
    """Median seconds per call; as the Rust runner does, a sample repeats a fast `fn` until it
    lasts at least `min_sample` seconds, so timer resolution and one-off stalls do not dominate."""
    fn()
    t = time.perf_counter()
    fn()
    once = time.perf_counter() - t
    inner = max(1, int(min_sample / max(once, 1e-9)) + 1) if once < min_sample else 1
    times = []
    start = time.perf_counter()
    while len(times) < max_samples and (len(times) < 3 or time.perf_counter() - start < budget):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t) / inner)
    return statistics.median(times)


def numpy_rows(threads):
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    rows = {}
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=threads):
        for n in (256, 512, 1024, 2048):
            a = rng.standard_normal((n, n), dtype=np.float32)
            b = rng.standard_normal((n, n), dtype=np.float32)
            rows[f"matmul_f32_{n}"] = 2 * n**3 / timed(lambda: a @ b) / 1e9
        n = 1 << 24
        x = rng.standard_normal(n, dtype=np.float32)
        y = rng.standard_normal(n, dtype=np.float32)
        out = np.empty_like(x)
        rows["add_16M"] = 12 * n / timed(lambda: x + y) / 1e9
        rows["add_out_16M"] = 12 * n / timed(lambda: np.add(x, y, out=out)) / 1e9
        rows["mul_16M"] = 12 * n / timed(lambda: x * y) / 1e9
        rows["exp_16M"] = 8 * n / timed(lambda: np.exp(x)) / 1e9
        s = rng.standard_normal((4096, 1024), dtype=np.float32)

        def softmax():
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        rows["softmax_4096x1024"] = 8 * s.size / timed(softmax) / 1e9
    blas = [i.get("internal_api", "?") + " " + str(i.get("version", "")) + " " + str(i.get("architecture", ""))
            for i in threadpool_info() if i.get("user_api") == "blas"]
    return rows, "; ".join(blas)


def torch_rows(threads):
    import torch

    torch.set_num_threads(threads)
    rows = {}
    for n in (256, 512, 1024, 2048):
        a = torch.randn(n, n)
        b = torch.randn(n, n)
        rows[f"matmul_f32_{n}"] = 2 * n**3 / timed(lambda: a @ b) / 1e9
    n = 1 << 24
    x = torch.randn(n)
    y = torch.randn(n)
    out = torch.empty(n)
    rows["add_16M"] = 12 * n / timed(lambda: x + y) / 1e9
    rows["add_out_16M"] = 12 * n / timed(lambda: torch.add(x, y, out=out)) / 1e9
    rows["mul_16M"] = 12 * n / timed(lambda: x * y) / 1e9
    rows["exp_16M"] = 8 * n / timed(lambda: torch.exp(x)) / 1e9
    s = torch.randn(4096, 1024)
    rows["softmax_4096x1024"] = 8 * s.numel() / timed(lambda: torch.softmax(s, -1)) / 1e9
    rows["mlp_784_256_10_step"] = 1 / timed(torch_mlp_step())
    rows["gpt_d256_l2_t128_b8_step"] = 1 / timed(torch_gpt_step())
    rows["cnn_28x28_b64_step"] = 1 / timed(torch_cnn_step())
    for name, run in torch_pieces().items():
        rows[name] = 1 / timed(run)
    return rows


def torch_gpt_step():
    """The same train step as benches/workloads/gpt.rs: vocabulary 512, d 256, 4 heads, 2 pre-norm
    blocks (causal self-attention with a fused qkv projection, a tanh-GELU MLP 4x wide), a final
    LayerNorm and a bias-free head; sequence 128, batch 8; next-token cross-entropy; AdamW."""
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    vocab, dim, heads, layers, seq, batch = 512, 256, 4, 2, 128, 8

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (p.reshape(b, t, heads, d // heads).transpose(1, 2) for p in self.qkv(x).split(d, 2))
            scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(d // heads))
            weights = scores.masked_fill(self.mask[:t, :t], float("-inf")).softmax(-1)
            return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(dim), Attention(), nn.LayerNorm(dim)
            self.fc, self.act, self.proj = nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.proj(self.act(self.fc(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

        def forward(self, ids, positions):
            h = self.wte(ids) + self.wpe(positions)
            for block in self.blocks:
                h = block(h)
            return self.head(self.ln_f(h)).reshape(batch * seq, vocab)

    torch.manual_seed(0)
    model = Gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stream = (torch.arange(batch * seq + 1) * 7919 + 13) % vocab
    ids, targets = stream[:-1].reshape(batch, seq), stream[1:]
    positions = torch.arange(seq)

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(ids, positions), targets)
        loss.backward()
        optimizer.step()
        return loss

    return step


def torch_cnn_step():
    """The same train step as benches/workloads/cnn.rs: Conv2d(1, 16, 3) ReLU MaxPool2d(2),
    Conv2d(16, 32, 3) ReLU MaxPool2d(2), Flatten, Linear(800, 10); 28x28, batch 64; AdamW."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 5 * 5, 10),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1, 28, 28)
    y = torch.arange(64) * 7 % 10

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def torch_pieces():
    """benches/workloads/ops.rs: each run clears the input gradients, runs forward and
    back-propagates a fixed upstream gradient (the loss itself for cross-entropy)."""
    import math

    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    rows, cols = 4096, 1024
    b, h, t, d = 8, 4, 128, 64

    def fwd_bwd(inputs, forward, upstream):
        def run():
            for x in inputs:
                x.grad = None
            out = forward(*inputs)
            out.backward(upstream)
            return out

        return run

    leaf = lambda *shape: torch.randn(*shape).requires_grad_()
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    labels = torch.arange(rows) * 7919 % cols

    def attention(q, k, v):
        scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(d))
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v

    return {
        f"layer_norm_{rows}x{cols}_fwd_bwd": fwd_bwd(
            [leaf(rows, cols), leaf(cols), leaf(cols)],
            lambda x, w, bias: F.layer_norm(x, (cols,), w, bias, 1e-5), torch.randn(rows, cols)),
        f"gelu_{rows}x{cols}_fwd_bwd": fwd_bwd([leaf(rows, cols)], F.gelu, torch.randn(rows, cols)),
        f"attention_{b}x{h}x{t}x{d}_fwd_bwd": fwd_bwd(
            [leaf(b, h, t, d), leaf(b, h, t, d), leaf(b, h, t, d)], attention, torch.randn(b, h, t, d)),
        f"cross_entropy_{rows}x{cols}_fwd_bwd": fwd_bwd(
            [leaf(rows, cols)], lambda x: F.cross_entropy(x, labels), None),
    }


def torch_mlp_step(device="cpu"):
    """The same train step as benches/workloads/mlp.rs: 784-256-10, ReLU, batch 64, AdamW
    (lr 1e-3, PyTorch's defaults otherwise), cross-entropy, zero_grad(set_to_none=True)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, 784).to(device)
    y = (torch.arange(64) * 7 % 10).to(device)

    def step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step


def gpu_timed(fn, budget=2.0, max_samples=15, min_sample=0.01):
    """Median device seconds per call, as benches/bench.rs's `record_gpu` measures: a sample
    queues `fn` repeatedly between two CUDA events."""
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sample(inner):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / inner

    once = sample(1)
    inner = max(1, int(min_sample / max(once, 1e-9)) + 1) if once < min_sample else 1
    times = []
    begin = time.perf_counter()
    while len(times) < max_samples and (len(times) < 3 or time.perf_counter() - begin < budget):
        times.append(sample(inner))
    return statistics.median(times)


def torch_gpu_rows():
    """PyTorch on cuda:0 for the workloads of benches/bench.rs's `run_gpu`, same names."""
    import torch

    dev = torch.device("cuda:0")
    # Full f32 products, as devcheck's cuBLAS calls compute (no TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = {}
    n = 1 << 24
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    rows["gpu_add_16M"] = 12 * n / gpu_timed(lambda: x + y) / 1e9
    rows["gpu_exp_16M"] = 8 * n / gpu_timed(lambda: torch.exp(x)) / 1e9
    rows["gpu_sum_all_16M"] = 4 * n / gpu_timed(lambda: x.sum()) / 1e9
    m = x.view(4096, 4096)
    rows["gpu_sum_dim0_4096x4096"] = 4 * n / gpu_timed(lambda: m.sum(0)) / 1e9
    s = torch.randn(4096, 1024, device=dev)
    rows["gpu_softmax_4096x1024"] = 8 * s.numel() / gpu_timed(lambda: torch.softmax(s, -1)) / 1e9
    for size, dtype, name in ((1024, torch.float32, "f32"), (4096, torch.float32, "f32"), (4096, torch.bfloat16, "bf16")):
        a = torch.randn(size, size, device=dev, dtype=dtype)
        b = torch.randn(size, size, device=dev, dtype=dtype)
        rows[f"gpu_matmul_{name}_{size}"] = 2 * size**3 / gpu_timed(lambda: a @ b) / 1e9
    host = torch.randn(n).pin_memory()
    rows["gpu_h2d_pinned_64M"] = 4 * n / gpu_timed(lambda: host.to(dev, non_blocking=True)) / 1e9
    rows["gpu_mlp_784_256_10_step"] = 1 / gpu_timed(torch_mlp_step(dev))
    return rows


def measure_gpu(out_path):
    import torch

    peers = {
        "numpy": {},
        "torch": {"1": torch_gpu_rows()},
        "info": [f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name(0)}"],
    }
    with open(out_path, "w") as f:
        json.dump(peers, f)


def measure(out_path, with_torch):
    peers = {"numpy": {}, "torch": {}, "info": []}
    for threads in (1, 2):
        np_rows, blas = numpy_rows(threads)
        peers["numpy"][str(threads)] = np_rows
        peers["info"].append(f"numpy BLAS ({threads} thread(s)): {blas}")
        if with_torch:
            peers["torch"][str(threads)] = torch_rows(threads)
    import numpy as np

    peers["info"].append(f"numpy {np.__version__}")
    if with_torch:
        import torch

        peers["info"].append(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    with open(out_path, "w") as f:
        json.dump(peers, f)


def table(ours_paths, peer_paths):
    # Best round per cell: on a shared machine the slow rounds are the ones something else ran in.
    ours = {}
    for path in ours_paths:
        for m in json.load(open(path)):
            key = (m["workload"], m["threads"])
            best = ours.get(key)
            faster = best is None or (m["rate"] > best["rate"] if m["higher_is_better"] else m["rate"] < best["rate"])
            if faster:
                ours[key] = m
    peers = {"numpy": {}, "torch": {}}
    info = []
    for path in peer_paths:
        data = json.load(open(path))
        info = data["info"]
        for peer in ("numpy", "torch"):
            for threads, rows in data[peer].items():
                for w, rate in rows.items():
                    key = (w, int(threads))
                    peers[peer][key] = max(rate, peers[peer].get(key, 0.0))
    for line in info:
        print(line)
    rounds = f"best of {len(ours_paths)} round(s) each"
    print(f"devcheck and peers measured in turn, {rounds}")
    fmt = "{:<34} {:>3} {:>12} {:>12} {:>12} {:>9} {:>9}  {}"
    print(fmt.format("workload", "thr", "devcheck", "numpy", "torch", "vs numpy", "vs torch", "unit"))
    order = sorted(ours.values(), key=lambda m: m["threads"])
    for m in order:
        key = (m["workload"], m["threads"])
        n, tt = peers["numpy"].get(key), peers["torch"].get(key)
        r = m["rate"]
        digits = 1 if m["higher_is_better"] else 3
        cell = lambda v: "-" if v is None else f"{v:.{digits}f}"
        # Above 1 means devcheck is faster, whichever way the unit runs.
        ratio = lambda v: "-" if not v else f"{(r / v if m['higher_is_better'] else v / r):.2f}x"
        print(fmt.format(m["workload"], m["threads"], cell(r), cell(n), cell(tt), ratio(n), ratio(tt), m["unit"]))
    for m in order:
        if m["workload"].startswith("gpu_") and m.get("detail"):
            print(f"{m['workload']}: {m['detail']}")
    for m in order:
        floor = ours.get((m.get("floor"), m["threads"])) if m.get("floor") else None
        if floor:
            print(f"{m['workload']} takes {m['median_s'] / floor['median_s']:.2f}x the time of "
                  f"{floor['workload']} ({m.get('detail') or 'same input'})")


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "measure-gpu":
        return measure_gpu(args[1])
    if len(args) >= 2 and args[0] == "measure":
        return measure(args[1], "--no-torch" not in args)
    if len(args) >= 4 and args[0] == "table" and "--peers" in args:
        split = args.index("--peers")
        return table(args[1:split], args[split + 1:])
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
