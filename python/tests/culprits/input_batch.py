"""Culprit: the input batch still on the CPU. `.to()` is not in place: its result is dropped."""

import torch.nn.functional as F


def train_step(model, x, y):
    device = next(model.parameters()).device
    x.to(device)  # the guide's "WRONG: result is discarded"
    y = y.to(device)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.detach()


def train_step_fixed(model, x, y):
    device = next(model.parameters()).device
    x = x.to(device)
    y = y.to(device)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.detach()
