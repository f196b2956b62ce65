"""Models for the command-line tests: a clean one, one with a plain attribute, a factory, and
names that are not models."""

import torch
from torch import nn


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc(x)


class PlainScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(128, 10)
        self.scale = torch.ones(10)

    def forward(self, x):
        return self.fc(x) * self.scale


class Tagger(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, ids, mask):
        return self.out(self.embed(ids)) * mask.unsqueeze(-1)


def make_tagger():
    return Tagger(vocab=1000)


def not_a_model():
    return [1, 2, 3]


LIMIT = 3
