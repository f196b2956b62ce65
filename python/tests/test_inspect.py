"""`dct.inspect`: every parameter and buffer with its device, and every tensor `.to()` leaves
behind, each at the line that assigned it."""

import devcheck.torch as dct
import torch
from helpers import assert_at
from user_models import encoder


def test_inventory_lists_every_tensor_with_its_kind():
    report = dct.inspect(encoder.Encoder())
    rows = {row["path"]: row for row in report.data["tensors"]}
    assert rows["embed.weight"]["kind"] == "parameter"
    assert rows["head.weight"]["tied_to"] == "embed.weight"
    assert rows["causal_mask"]["kind"] == "non-persistent buffer"
    assert rows["norm.num_batches_tracked"]["dtype"] == "int64"
    assert rows["norm.running_mean"]["bytes"] == 16
    assert rows["pos_cache"]["kind"] == "plain attribute"
    assert rows["pos_cache"]["moved_by_to"] is False
    assert rows["heads[1].proj.bias"]["kind"] == "parameter in a plain list"
    assert rows["tables['scale']"]["kind"] == "in a plain dict"
    assert rows["embed.weight"]["assigned_at"] is None
    assert rows["pos_cache"]["assigned_at"]["line"] > 0
    assert report.summary == [
        "7 parameters (88 elements), 4 buffers, 6 tensors `.to()` leaves behind, 652 B"
    ]


def test_what_to_leaves_behind_is_found_at_its_assignment():
    report = dct.inspect(encoder.Encoder())
    assert report.codes() == ["unmoved-attribute"] * 3, report
    assert [f.severity for f in report.findings] == ["warning"] * 3
    attribute, heads, tables = report.findings
    assert_at(attribute, encoder, "plain attribute")
    assert attribute.message == (
        "plain tensor attribute `pos_cache` stays on cpu when the model moves: "
        "`.to()` does not move it"
    )
    assert_at(heads, encoder, "plain list")
    assert "plain list of 2 modules" in heads.message
    assert "`nn.ModuleList`" in heads.help
    assert_at(tables, encoder, "plain dict")
    assert "`nn.ParameterDict`" in tables.help
    assert not report.ok


def test_a_half_moved_model_is_an_error_naming_the_stragglers():
    model = encoder.Encoder().to("meta")
    model.norm.running_var = torch.ones(4)  # assigned after the move
    report = dct.inspect(model)
    assert report.codes()[0] == "mixed-devices", report
    mixed = report.findings[0]
    assert mixed.severity == "error"
    # (`.to("meta")` makes new parameters, so the tied head counts on its own here.)
    assert "11 of 12 tensors are on meta, 1 on cpu" in mixed.message
    assert "`norm.running_var` (buffer) on cpu" in mixed.details
    # Left behind on the CPU while the rest is on meta: errors now, not warnings.
    attribute = report.findings[1]
    assert attribute.severity == "error"
    assert "is on cpu, the rest of the model on meta" in attribute.message


def test_a_clean_model_has_no_findings():
    from user_models import gpt

    report = dct.inspect(gpt.GPT(gpt.GPTConfig()))
    assert report.findings == []
    dct.assert_clean(report)
    assert "transformer.h.0.attn.bias" in str(report)
