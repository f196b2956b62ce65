"""Models written as PyTorch users write them: each clean, each with a planted bug found at its
line, and each given back exactly as it was (parameters, buffers, BatchNorm statistics, tied
weights, gradients, optimizer state)."""

import devcheck.torch as dct
import pytest
import torch
from helpers import ModelSnapshot, assert_at, only
from user_models import cnn, gpt, hf_style, lstm, rotary


@pytest.fixture
def tokens():
    config = gpt.GPTConfig()
    x = torch.randint(0, config.vocab_size, (2, 16))
    y = torch.randint(0, config.vocab_size, (2, 16))
    return x, y


def test_gpt_forward_and_training_step_are_clean(tokens):
    model = gpt.GPT(gpt.GPTConfig())
    before = ModelSnapshot(model)
    report = dct.check_forward(model, *tokens)
    dct.assert_clean(report)
    assert report.findings == []
    step = dct.check_step(gpt.train_step, model, *tokens)
    dct.assert_clean(step)
    assert step.findings == []
    before.assert_unchanged()
    # Tied weights are still one parameter.
    assert model.lm_head.weight is model.transformer.wte.weight
    # The causal-mask buffer is the caller's, on the CPU.
    assert model.transformer.h[0].attn.bias.device.type == "cpu"


def test_gpt_positions_made_on_the_cpu(tokens):
    model = gpt.GPTWithCpuPositions(gpt.GPTConfig())
    for report in (
        dct.check_forward(model, tokens[0]),
        dct.check_step(gpt.train_step, model, *tokens),
    ):
        assert report.codes() == ["created-off-device", "device-mismatch"], report
        assert_at(only(report, "created-off-device"), gpt, "positions made")
        used = only(report, "device-mismatch")
        assert_at(used, gpt, "positions used")
        assert used.message == (
            "device mismatch in `F.embedding`: input is on cpu, weight is on cuda:0"
        )
        assert "weight `transformer.wpe.weight` (a parameter)" in used.details[1]
        assert "inside `transformer.wpe` (Embedding)" in used.details


def test_gpt_step_with_an_optimizer_made_outside_leaves_its_state_alone(tokens):
    model = gpt.GPT(gpt.GPTConfig())
    optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95))
    # A real step on the CPU first: the optimizer has state to protect.
    _, loss = model(*tokens)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    state = {
        id(p): {k: v.clone() for k, v in s.items()} for p, s in optimizer.state.items()
    }
    state_object = optimizer.state
    before = ModelSnapshot(model)

    def step_on_cpu(model, x, y):
        _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    report = dct.check_step(step_on_cpu, model, *tokens, device="cpu")
    dct.assert_clean(report)
    before.assert_unchanged()
    assert optimizer.state is state_object
    for param, values in optimizer.state.items():
        for key, value in values.items():
            assert torch.equal(value, state[id(param)][key]), key


def test_cnn_with_batchnorm_trained_for_a_step_is_clean_and_untouched():
    model = cnn.ConvNet()
    step, optimizer = cnn.make_train_step(model)
    images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    model.eval()  # the step switches to train mode; the model must come back in eval mode
    bn = model.features[1]
    stats = (
        bn.running_mean.clone(),
        bn.running_var.clone(),
        bn.num_batches_tracked.clone(),
    )
    before = ModelSnapshot(model)
    report = dct.check_step(step, model, images, labels)
    dct.assert_clean(report)
    before.assert_unchanged()
    assert torch.equal(bn.running_mean, stats[0])
    assert torch.equal(bn.running_var, stats[1])
    assert bn.num_batches_tracked.item() == stats[2].item() == 0
    assert not model.training
    assert len(optimizer.state) == 0


def test_cnn_statistics_kept_as_plain_attributes():
    model = cnn.ConvNetPlainStats()
    step, _ = cnn.make_train_step(model)
    report = dct.check_step(
        step, model, torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    )
    assert report.codes() == ["unmoved-attribute"] * 2 + ["device-mismatch"] * 2, report
    assert_at(report.findings[0], cnn, "mean assigned")
    assert_at(report.findings[2], cnn, "stats used")
    assert (
        report.findings[2].message
        == "device mismatch in `-`: lhs is on cuda:0, rhs is on cpu"
    )
    assert (
        "rhs `mean` (a plain attribute): cpu float32 [1, 3, 1, 1]"
        in report.findings[2].details
    )


def test_an_optimizer_step_mixing_devices_is_reported():
    """Momentum buffers made by a step on the CPU stay there when the model moves: on the GPU the
    next optimizer step mixes them with the gradients."""
    model = cnn.ConvNet()
    step, optimizer = cnn.make_train_step(model, device="cpu")
    images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    step(model, images, labels)  # a warm-up step on the CPU makes the momentum buffers
    buffers = {id(p): s["momentum_buffer"].clone() for p, s in optimizer.state.items()}

    def train_step(model, images, labels):
        images, labels = images.to("cuda"), labels.to("cuda")
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()  # its momentum buffers are on the CPU
        return loss.detach()

    report = dct.check_step(train_step, model, images, labels)
    assert report.codes() == ["device-mismatch"], report
    finding = report.findings[0]
    assert finding.line == train_step.__code__.co_firstlineno + 5
    assert finding.message.startswith("device mismatch in `torch._foreach_")
    assert (
        'optimizer.state[features.0.weight]["momentum_buffer"]` (optimizer state): cpu'
        in " ".join(finding.details)
    )
    assert "create the optimizer after moving the model" in finding.help
    # The optimizer's own state is untouched.
    for param, values in optimizer.state.items():
        assert torch.equal(values["momentum_buffer"], buffers[id(param)])


def test_lstm_classifier_step_is_clean_and_its_cpu_state_bug_found():
    model = lstm.LSTMClassifier()
    tokens = torch.randint(1, 50, (3, 7))
    lengths = torch.tensor([7, 5, 2])
    labels = torch.tensor([0, 3, 1])
    step, optimizer = lstm.make_train_step(model)
    before = ModelSnapshot(model)
    dct.assert_clean(dct.check_step(step, model, tokens, lengths, labels))
    before.assert_unchanged()
    assert len(optimizer.state) == 0

    buggy = lstm.LSTMClassifierCpuState()
    step, _ = lstm.make_train_step(buggy)
    report = dct.check_step(step, buggy, tokens, lengths, labels)
    assert report.codes() == ["created-off-device"] * 2 + ["device-mismatch"], report
    assert_at(report.findings[0], lstm, "state made")
    used = only(report, "device-mismatch")
    assert_at(used, lstm, "state used")
    assert "cpu float32 [2, 3, 24], made by `torch.zeros`" in used.details[0]
    assert used.count == 2  # h0 and c0


def test_rotary_embedding_clean_and_cached_as_plain_attributes():
    x = torch.randn(2, 10, 32)
    model = rotary.RotaryAttention()
    dct.assert_clean(dct.check_forward(model, x))

    buggy = rotary.RotaryAttention(rotary=rotary.CachedRotaryEmbedding)
    report = dct.check_forward(buggy, x)
    assert report.codes() == ["unmoved-attribute"] * 2 + ["device-mismatch"] * 2, report
    assert_at(report.findings[0], rotary, "cos assigned")
    assert report.findings[0].message.startswith(
        "plain tensor attribute `rotary.cos_cached`"
    )
    assert_at(report.findings[2], rotary, "rotation used")
    # q and k both meet the same cached tensor: one finding, the other line listed.
    assert any(
        "mixed devices again at python/tests/user_models/rotary.py" in d
        for d in report.findings[2].details
    )


def test_hugging_face_style_model_from_a_config():
    config = hf_style.TinyBertConfig()
    model = hf_style.TinyBertForSequenceClassification(config)
    ids = torch.randint(0, config.vocab_size, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    labels = torch.tensor([0, 2])
    before = ModelSnapshot(model)
    dct.assert_clean(dct.check_forward(model, ids, attention_mask=mask, labels=labels))
    dct.assert_clean(dct.check_forward(model, input_ids=ids))
    before.assert_unchanged()

    buggy = hf_style.TinyBertForSequenceClassification(
        config, hf_style.EmbeddingsCpuTokenTypes
    )
    report = dct.check_forward(buggy, ids, attention_mask=mask)
    assert report.codes() == ["created-off-device", "device-mismatch"], report
    assert_at(report.findings[0], hf_style, "types made")
    assert_at(report.findings[1], hf_style, "types used")
    assert (
        "inside `embeddings.token_type_embeddings` (Embedding)"
        in report.findings[1].details
    )
