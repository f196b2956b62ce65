"""Culprit: the labels still on the CPU: the inputs are moved, the targets are forgotten."""

import torch
from torch import nn

criterion = nn.CrossEntropyLoss()


def train_step(model, inputs, targets):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs = inputs.to(device)
    outputs = model(inputs)
    loss = criterion(outputs, targets)  # culprit: labels
    loss.backward()
    return loss.detach()


def train_step_fixed(model, inputs, targets):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    inputs = inputs.to(device)
    targets = targets.to(device)
    outputs = model(inputs)
    loss = criterion(outputs, targets)
    loss.backward()
    return loss.detach()
