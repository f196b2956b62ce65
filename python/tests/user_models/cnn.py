"""A small CNN with BatchNorm for 3-channel images, normalizing its input with dataset
statistics, trained for a step with SGD and momentum."""

import torch
import torch.nn.functional as F
from torch import nn

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1))
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(16, num_classes)

    def forward(self, x):
        x = (x - self.mean) / self.std
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))


class ConvNetPlainStats(ConvNet):
    """The planted bug: the normalization statistics as plain attributes."""

    def __init__(self, num_classes=10):
        super().__init__(num_classes)
        del self.mean, self.std
        self.mean = torch.tensor(MEAN).view(1, 3, 1, 1)  # culprit: mean assigned
        self.std = torch.tensor(STD).view(1, 3, 1, 1)

    def forward(self, x):
        x = (x - self.mean) / self.std  # culprit: stats used
        x = self.features(x)
        return self.classifier(torch.flatten(x, 1))


def make_train_step(model, device="cuda"):
    """The guides' loop body, with the optimizer built once, outside the step."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train_step(model, images, labels):
        model.train()
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step, optimizer
