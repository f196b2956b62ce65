"""Runs devcheck's benchmark workloads in numpy and PyTorch and prints one table with ratios.

Usage: python scripts/bench_peers.py DEVCHECK_JSON [--no-torch]
DEVCHECK_JSON is the output of `cargo bench --bench bench -- --json`. Rates are higher-is-better
(GFLOP/s, GB/s); a ratio above 1 means devcheck is faster than that peer.
"""
import json
import os
import statistics
import sys
import time


def timed(fn, budget=2.0, max_runs=15):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < 3 or time.perf_counter() - start < budget):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
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
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: bench_peers.py DEVCHECK_JSON [--no-torch] [--peer-json OUT]")
    ours = json.load(open(sys.argv[1]))
    with_torch = "--no-torch" not in sys.argv
    peer = os.environ.get("BENCH_PEER", "numpy")
    table = []
    for threads in (1, 2):
        np_rows, blas = numpy_rows(threads) if peer in ("numpy", "all") else ({}, "")
        t_rows = torch_rows(threads) if with_torch else {}
        for m in ours:
            if m["threads"] != threads:
                continue
            w = m["workload"]
            table.append((w, threads, m["rate"], m["unit"], np_rows.get(w), t_rows.get(w)))
        if blas:
            print(f"numpy BLAS ({threads} thread(s)): {blas}")
    fmt = "{:<22} {:>3} {:>12} {:>12} {:>12} {:>9} {:>9}"
    print(fmt.format("workload", "thr", "devcheck", "numpy", "torch", "vs numpy", "vs torch"))
    for w, t, r, unit, n, tt in table:
        cell = lambda v: "-" if v is None else f"{v:.1f}"
        ratio = lambda v: "-" if not v else f"{r / v:.2f}x"
        print(fmt.format(w, t, f"{r:.1f}", cell(n), cell(tt), ratio(n), ratio(tt)) + f"  {unit}")


if __name__ == "__main__":
    main()
