"""The relative error of PyTorch's f32 GELU (its vectorised CPU path) against mpmath, at the
points README's performance section quotes. Run with the peers' environment:
`.venv/peers/bin/python scripts/peer_gelu_error.py` (scripts/bench-peers.sh creates it)."""

import mpmath as mp
import torch
import torch.nn.functional as F

mp.mp.dps = 40
points = [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -8.0, -10.0]
# Repeated so the tensor is long enough for the vectorised kernel.
x = torch.tensor(points, dtype=torch.float32).repeat(64)
got = F.gelu(x)[: len(points)].tolist()
print(f"torch {torch.__version__}")
print(f"{'x':>6} {'torch f32':>14} {'exact':>14} {'relative error':>15}")
for xi, yi in zip(points, got):
    exact = mp.mpf(xi) * mp.ncdf(xi)
    rel = abs((mp.mpf(yi) - exact) / exact)
    print(f"{xi:6.1f} {yi:14.6e} {mp.nstr(exact, 7):>14} {mp.nstr(rel, 3):>15}")
