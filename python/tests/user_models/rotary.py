"""Rotary position embedding (RoPE) in a single attention layer, as in LLaMA-style models."""

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]


class CachedRotaryEmbedding(nn.Module):
    """The planted bug: cos and sin precomputed in `__init__` and kept as plain attributes."""

    def __init__(self, dim, max_len=64, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(max_len).float()
        emb = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
        self.cos_cached = emb.cos()[None, None]  # culprit: cos assigned
        self.sin_cached = emb.sin()[None, None]

    def forward(self, x, seq_len):
        return self.cos_cached[:, :, :seq_len], self.sin_cached[:, :, :seq_len]


class RotaryAttention(nn.Module):
    def __init__(self, dim=32, heads=4, rotary=RotaryEmbedding):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)
        self.rotary = rotary(self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (
            self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        )
        cos, sin = self.rotary(v, T)
        q = q * cos + rotate_half(q) * sin  # culprit: rotation used
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, C))
