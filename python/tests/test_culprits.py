"""The guides' six usual culprits of a device mismatch, each found by a dry run on a fake cuda:0
(no GPU here) at the culprit's line, with the right code, name and help; each fixed twin clean."""

from pathlib import Path

import devcheck.torch as dct
import torch
from culprits import (
    common,
    hidden_state,
    input_batch,
    labels,
    loss_weight,
    mask,
    pos_enc,
)
from helpers import ModelSnapshot, assert_at, line_of, only


def test_input_batch_left_on_the_cpu():
    model = common.Classifier()
    report = dct.check_step(input_batch.train_step, model, *common.loader_batch())
    assert report.codes() == ["device-mismatch"], report
    finding = only(report, "device-mismatch")
    assert_at(finding, common, "input batch")
    assert finding.severity == "error"
    assert "`x` (from the batch): cpu float32 [4, 8]" in finding.details[0]
    assert (
        "weight `hidden.weight` (a parameter): cuda:0 float32 [16, 8]"
        in finding.details
    )
    assert finding.help.startswith(
        "move `x` to cuda:0 in the step, right after the loader yields it"
    )
    # The copy `x.to(device)` made and dropped is named, with its line.
    source = Path(input_batch.__file__).read_text().splitlines()
    step_line = next(i for i, t in enumerate(source, 1) if "x.to(device)  #" in t)
    assert f"input_batch.py:{step_line}" in " ".join(finding.details), finding.details
    # Its result stayed on the CPU: the second layer and the loss are echoes, not new findings.
    assert (
        "its result stayed on cpu and 2 later ops mixed devices again"
        in finding.details
    )

    dct.assert_clean(
        dct.check_step(input_batch.train_step_fixed, model, *common.loader_batch())
    )


def test_labels_left_on_the_cpu():
    model = common.Classifier()
    report = dct.check_step(labels.train_step, model, *common.loader_batch())
    assert report.codes() == ["device-mismatch"], report
    finding = only(report, "device-mismatch")
    assert_at(finding, labels, "labels")
    assert (
        finding.message
        == "device mismatch in `F.cross_entropy`: input is on cuda:0, target is on cpu"
    )
    assert "target `targets` (from the batch): cpu int64 [4]" in finding.details
    assert "move `targets` to cuda:0 in the step" in finding.help

    dct.assert_clean(
        dct.check_step(labels.train_step_fixed, model, *common.loader_batch())
    )


def test_mask_created_in_forward_on_the_cpu():
    model = mask.SelfAttention(4)
    x = torch.randn(2, 5, 4)
    report = dct.check_forward(model, x)
    assert report.codes() == ["created-off-device", "device-mismatch"], report
    made = only(report, "created-off-device")
    assert_at(made, mask, "mask made")
    assert made.severity == "error"
    assert (
        made.message
        == "`torch.ones` made a tensor on cpu during forward; the target is cuda:0"
    )
    assert "device=x.device" in made.help
    used = only(report, "device-mismatch")
    assert_at(used, mask, "mask used")
    assert (
        used.message
        == "device mismatch in `.masked_fill()`: input is on cuda:0, mask is on cpu"
    )
    assert "mask: cpu bool [5, 5], made by `==` at " in used.details[1]
    made_at = f"python/tests/culprits/mask.py:{line_of(mask, 'mask used')}"
    assert used.help.startswith(f"create the mask made at {made_at}:"), used.help

    dct.assert_clean(dct.check_forward(mask.SelfAttentionFixed(4), x))


def test_positional_encoding_kept_as_a_plain_attribute():
    model = pos_enc.PositionalEncoding()
    x = torch.randn(2, 5, pos_enc.WIDTH)
    report = dct.check_forward(model, x)
    assert report.codes() == ["unmoved-attribute", "device-mismatch"], report
    attribute = only(report, "unmoved-attribute")
    assert_at(attribute, pos_enc, "plain attribute")
    assert attribute.severity == "error"
    assert attribute.message.startswith(
        "plain tensor attribute `pe` is on cpu, the rest of the model on cuda:0"
    )
    assert 'register_buffer("pe", tensor, persistent=False)' in attribute.help
    used = only(report, "device-mismatch")
    assert_at(used, pos_enc, "encoding used")
    assert "rhs `pe` (a plain attribute, a view): cpu float32 [1, 5, 8]" in used.details
    assert "`pe` is a plain tensor attribute (assigned at " in used.help

    fixed = dct.check_forward(pos_enc.PositionalEncodingFixed(), x)
    dct.assert_clean(fixed)
    assert fixed.findings == []


def test_loss_weights_made_on_the_cpu():
    model = common.Classifier()
    report = dct.check_step(loss_weight.train_step, model, *common.loader_batch())
    assert report.codes() == ["created-off-device", "device-mismatch"], report
    assert_at(only(report, "created-off-device"), loss_weight, "weights made")
    used = only(report, "device-mismatch")
    assert_at(used, loss_weight, "weights used")
    assert "weight: cpu float32 [3], made by `torch.tensor` at " in " ".join(
        used.details
    )
    dct.assert_clean(
        dct.check_step(loss_weight.train_step_fixed, model, *common.loader_batch())
    )


def test_loss_module_built_with_cpu_weights_before_the_loop():
    model = common.Classifier()
    report = dct.check_step(
        loss_weight.make_criterion_step(), model, *common.loader_batch()
    )
    assert report.codes() == ["device-mismatch"], report
    used = only(report, "device-mismatch")
    assert_at(used, loss_weight, "criterion weights used")
    assert (
        "weight `weight` (a buffer of a `CrossEntropyLoss` outside the model)"
        in " ".join(used.details)
    ), used.details
    assert "criterion.to(device)" in used.help or ".to(device)" in used.help
    dct.assert_clean(
        dct.check_step(
            loss_weight.make_criterion_step_fixed(), model, *common.loader_batch()
        )
    )


def test_hidden_state_cached_from_a_cpu_run():
    x = torch.randn(3, hidden_state.WIDTH)
    model = hidden_state.Recurrent()
    model(x)  # a warm-up on the CPU leaves the cached state there
    cached = model.hidden
    before = ModelSnapshot(model)
    report = dct.check_forward(model, x)
    assert report.codes() == ["unmoved-attribute", "device-mismatch"], report
    attribute = only(report, "unmoved-attribute")
    assert_at(attribute, hidden_state, "state assigned")
    assert "`hidden`" in attribute.message
    used = only(report, "device-mismatch")
    assert_at(used, hidden_state, "state used")
    assert "input `hidden` (a plain attribute): cpu float32 [3, 6]" in used.details
    assert "register_buffer" in used.help
    # The caller's model keeps its own cached state, not the dry run's.
    before.assert_unchanged()
    assert model.hidden is cached

    fixed = hidden_state.RecurrentFixed()
    fixed(x)
    dct.assert_clean(dct.check_forward(fixed, x))
