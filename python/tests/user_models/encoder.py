"""An encoder holding every kind of tensor: parameters, a buffer, a non-persistent buffer, a tied
head, and what `.to()` leaves behind: a plain tensor attribute, heads in a plain list, and
tensors in a plain dict."""

import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)


class Encoder(nn.Module):
    def __init__(self, vocab=10, width=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])
        self.norm = nn.BatchNorm1d(width)
        self.register_buffer("causal_mask", torch.ones(3, 3).tril(), persistent=False)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.pos_cache = torch.zeros(3, width)  # culprit: plain attribute
        self.heads = [Head(width) for _ in range(2)]  # culprit: plain list
        self.tables = {"scale": torch.ones(width)}  # culprit: plain dict
