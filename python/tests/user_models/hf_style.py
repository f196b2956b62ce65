"""A Hugging Face-style encoder built from a config object: embeddings with position ids as a
non-persistent buffer, default token types and attention mask made on the model's device, a
`device` property, and an output object carrying the loss."""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TinyBertConfig:
    vocab_size: int = 100
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 64
    max_position_embeddings: int = 64
    type_vocab_size: int = 2
    num_labels: int = 3
    layer_norm_eps: float = 1e-12


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


class Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size
        )
        self.token_type_embeddings = nn.Embedding(
            config.type_vocab_size, config.hidden_size
        )
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.register_buffer(
            "position_ids",
            torch.arange(config.max_position_embeddings).expand((1, -1)),
            persistent=False,
        )

    def default_token_types(self, input_shape, device):
        return torch.zeros(input_shape, dtype=torch.long, device=device)

    def forward(self, input_ids, token_type_ids=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = self.default_token_types(input_shape, input_ids.device)
        words = self.word_embeddings(input_ids)
        types = self.token_type_embeddings(token_type_ids)  # culprit: types used
        embeddings = words + types
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.LayerNorm(embeddings)


class EmbeddingsCpuTokenTypes(Embeddings):
    """The planted bug: default token type ids made without the input's device."""

    def default_token_types(self, input_shape, device):
        return torch.zeros(input_shape, dtype=torch.long)  # culprit: types made


class TinyBertForSequenceClassification(nn.Module):
    def __init__(self, config, embeddings=Embeddings):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.embeddings = embeddings(config)
        layer = nn.TransformerEncoderLayer(
            config.hidden_size,
            config.num_attention_heads,
            config.intermediate_size,
            dropout=0.0,
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, config.num_hidden_layers, enable_nested_tensor=False
        )
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    @property
    def device(self):
        return next(self.parameters()).device

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, device=self.device)
        hidden = self.embeddings(input_ids, token_type_ids)
        padding = attention_mask == 0
        hidden = self.encoder(hidden, src_key_padding_mask=padding)
        logits = self.classifier(hidden[:, 0])
        loss = None
        if labels is not None:
            loss = nn.CrossEntropyLoss()(
                logits.view(-1, self.num_labels), labels.view(-1)
            )
        return SequenceClassifierOutput(loss=loss, logits=logits)
