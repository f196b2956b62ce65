"""An LSTM text classifier over padded token sequences, packed by their lengths."""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


class LSTMClassifier(nn.Module):
    def __init__(self, vocab=50, embed=16, hidden=24, classes=4, layers=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed, padding_idx=0)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)
        self.layers, self.hidden = layers, hidden

    def initial_state(self, batch, like):
        zeros = like.new_zeros(self.layers, batch, self.hidden)
        return zeros, zeros.clone()

    def forward(self, tokens, lengths):
        embedded = self.embedding(tokens)
        # Lengths stay on the CPU: pack_padded_sequence wants them there.
        packed = pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        state = self.initial_state(tokens.size(0), embedded)
        _, (h_n, _) = self.lstm(packed, state)  # culprit: state used
        return self.head(h_n[-1])


class LSTMClassifierCpuState(LSTMClassifier):
    """The planted bug: the initial state made without a device."""

    def initial_state(self, batch, like):
        h0 = torch.zeros(self.layers, batch, self.hidden)  # culprit: state made
        return h0, torch.zeros(self.layers, batch, self.hidden)


def make_train_step(model, device="cuda"):
    """Tokens and labels go to the device; the lengths stay where the loader put them, on the
    CPU, which is where `pack_padded_sequence` wants them."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    def train_step(model, tokens, lengths, labels):
        tokens, labels = tokens.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(tokens, lengths), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step, optimizer
