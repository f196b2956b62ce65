"""Culprit: class weights for the loss made on the CPU, inside the loss (as the Rust twin does)
and in a loss module built before the training loop (the common PyTorch way)."""

import torch
import torch.nn.functional as F
from torch import nn

CLASS_WEIGHTS = [1.0, 2.0, 0.5]


def weighted_loss(logits, targets):
    weights = torch.tensor(CLASS_WEIGHTS)  # culprit: weights made
    return F.cross_entropy(logits, targets, weight=weights)  # culprit: weights used


def weighted_loss_fixed(logits, targets):
    weights = torch.tensor(CLASS_WEIGHTS, device=logits.device)
    return F.cross_entropy(logits, targets, weight=weights)


def train_step(model, x, y):
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    loss = weighted_loss(model(x), y)
    loss.backward()
    return loss.detach()


def train_step_fixed(model, x, y):
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    loss = weighted_loss_fixed(model(x), y)
    loss.backward()
    return loss.detach()


def make_criterion_step(device="cuda"):
    """The loss module is built before the loop with CPU weights; only the model is moved."""
    criterion = nn.CrossEntropyLoss(weight=torch.tensor(CLASS_WEIGHTS))

    def train_step(model, x, y):
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)  # culprit: criterion weights used
        loss.backward()
        return loss.detach()

    return train_step


def make_criterion_step_fixed(device="cuda"):
    criterion = nn.CrossEntropyLoss(weight=torch.tensor(CLASS_WEIGHTS))

    def train_step(model, x, y):
        # The fix is to move the loss module with the model. A script does it once, next to
        # `model.to(device)`; here the step does it (in place, nothing to do once it is there),
        # because the machine the tests run on has no GPU to move it to before the run.
        criterion.to(device)
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        return loss.detach()

    return train_step
