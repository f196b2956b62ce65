"""Culprit: a causal mask created inside forward on the CPU (`torch.ones` without `device=`)."""

import math

import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.query = nn.Linear(width, width, bias=False)
        self.key = nn.Linear(width, width, bias=False)

    def forward(self, x):
        T = x.shape[1]
        scores = self.query(x) @ self.key(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        mask = torch.tril(torch.ones(T, T))  # culprit: mask made
        scores = scores.masked_fill(mask == 0, float("-inf"))  # culprit: mask used
        return scores.softmax(dim=-1)


class SelfAttentionFixed(SelfAttention):
    def forward(self, x):
        T = x.shape[1]
        scores = self.query(x) @ self.key(x).transpose(1, 2) / math.sqrt(x.shape[-1])
        mask = torch.tril(torch.ones(T, T, device=x.device, dtype=torch.bool))
        scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)
