"""Times devcheck.torch on a GPT-2-small-shaped model (12 layers, width 768, 12 heads, vocabulary
50257, context 1024): the forward dry run and a training-step dry run (AdamW), next to the same
forward and step run plainly on the CPU, which is the work a dry run does underneath.

    PYTHONPATH=python python benches/python/bench_torch_check.py [--runs N] [--batch B] [--seq T]

The Rust checker's counterpart dry-runs the same shape without element data:
`cargo run --release --example bench_check` (examples/bench_check.rs; the check itself is
tests/check_gpt2.rs).
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import devcheck.torch as dct
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, CONTEXT, LAYERS, HEADS, WIDTH = 50257, 1024, 12, 12, 768


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.mlp_proj = nn.Linear(4 * WIDTH, WIDTH)
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(WIDTH, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(
            dim=-1
        )
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def make_step() -> Callable[..., torch.Tensor]:
    def train_step(model: GPT2, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
        x, y = x.to(device), y.to(device)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return train_step


def alternate(
    runs: int, cases: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]
) -> dict[str, float]:
    """Median seconds of each case's work, the cases taking turns so that a busy neighbour on
    the machine slows them alike. A case is (setup, work): setup runs untimed before each run."""
    for setup, work in cases.values():
        work(setup())  # warm-up: first calls allocate and fill caches
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (setup, work) in cases.items():
            argument = setup()
            start = time.perf_counter()
            work(argument)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = GPT2()
    parameters = sum(p.numel() for p in model.parameters())
    x = torch.randint(0, VOCAB, (args.batch, args.seq))
    y = torch.randint(0, VOCAB, (args.batch, args.seq))
    step = make_step()

    report = dct.check_forward(model, x)
    dct.assert_clean(report)
    dct.assert_clean(dct.check_step(step, model, x, y))

    spare = GPT2()

    def fresh_copy() -> GPT2:
        # The plain step changes the model it steps: each run steps a copy reset to the model.
        spare.load_state_dict(model.state_dict())
        return spare

    def plain_step(copy: GPT2) -> None:
        step(copy, x, y)

    def plain_forward(_: None) -> None:
        with torch.no_grad():
            model(x)

    def nothing() -> None:
        return None

    medians = alternate(
        args.runs,
        {
            "forward on the CPU (plain, no_grad)": (nothing, plain_forward),
            "dct.check_forward on fake cuda:0": (
                nothing,
                lambda _: dct.check_forward(model, x),
            ),
            "training step on the CPU (plain, AdamW)": (fresh_copy, plain_step),
            "dct.check_step on fake cuda:0": (
                nothing,
                lambda _: dct.check_step(step, model, x, y),
            ),
        },
    )

    print(
        f"GPT-2 small shape: {parameters:,} parameters, batch {args.batch} x {args.seq} tokens; "
        f"torch {torch.__version__}, Python {platform.python_version()}, "
        f"{torch.get_num_threads()} CPU threads ({platform.processor() or platform.machine()})"
    )
    print(f"median of {args.runs} alternating runs after one warm-up each, seconds:")
    for name, seconds in medians.items():
        print(f"  {name:<42} {seconds:8.3f}")
    print(f"  {report.summary[1]}")


if __name__ == "__main__":
    main()
