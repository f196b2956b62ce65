"""A small classifier and the training step of the guides, shared by the batch culprits."""

import torch
from torch import nn

BATCH, FEATURES, CLASSES = 4, 8, 3


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        h = torch.relu(self.hidden(x))  # culprit: input batch
        return self.head(h)


def loader_batch():
    """A batch as a DataLoader yields it: on the CPU."""
    return torch.randn(BATCH, FEATURES), torch.randint(0, CLASSES, (BATCH,))
