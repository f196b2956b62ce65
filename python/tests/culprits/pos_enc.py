"""Culprit: a positional encoding kept as a plain tensor attribute, which `.to()` does not move."""

import math

import torch
from torch import nn

MAX_LEN, WIDTH = 16, 8


def sinusoidal(max_len, width):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, width, 2) * (-math.log(10000.0) / width))
    pe = torch.zeros(1, max_len, width)
    pe[0, :, 0::2] = torch.sin(position * div_term)
    pe[0, :, 1::2] = torch.cos(position * div_term)
    return pe


class PositionalEncoding(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.pe = sinusoidal(MAX_LEN, WIDTH)  # culprit: plain attribute

    def forward(self, x):
        return self.proj(x) + self.pe[:, : x.size(1)]  # culprit: encoding used


class PositionalEncodingFixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.register_buffer("pe", sinusoidal(MAX_LEN, WIDTH), persistent=False)

    def forward(self, x):
        return self.proj(x) + self.pe[:, : x.size(1)]
