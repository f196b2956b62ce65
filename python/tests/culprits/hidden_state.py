"""Culprit: a hidden state cached from a previous run on the CPU. The cell keeps its last state
between calls in a plain attribute; after a warm-up on the CPU the model is moved, the state is not."""

import torch
from torch import nn

WIDTH = 6


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(WIDTH, WIDTH)
        self.rec = nn.Linear(WIDTH, WIDTH, bias=False)
        self.hidden = None

    def forward(self, x):
        if self.hidden is None:
            self.hidden = torch.zeros(x.shape[0], WIDTH, device=x.device)
        h = torch.tanh(self.inp(x) + self.rec(self.hidden))  # culprit: state used
        self.hidden = h.detach()  # culprit: state assigned
        return h


class RecurrentFixed(Recurrent):
    """The state is a non-persistent buffer: `.to()` moves it, checkpoints leave it out."""

    def __init__(self):
        super().__init__()
        del self.hidden
        self.register_buffer("hidden", None, persistent=False)
