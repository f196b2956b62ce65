"""Rendered reports compared with expected text (`snapshots/*.txt`; paths are relative to the
repository root, where the tests run). `DEVCHECK_UPDATE_SNAPSHOTS=1` rewrites them after a
deliberate change; read the difference before committing it."""

import devcheck.torch as dct
import pytest
import torch
from culprits import common, labels, mask, pos_enc
from helpers import assert_matches_snapshot
from user_models import encoder


def test_mask_report_text():
    report = dct.check_forward(mask.SelfAttention(4), torch.randn(2, 5, 4))
    assert_matches_snapshot("mask", str(report))


def test_labels_step_report_text():
    report = dct.check_step(
        labels.train_step, common.Classifier(), *common.loader_batch()
    )
    assert_matches_snapshot("labels", str(report))


def test_positional_encoding_one_line_summary():
    report = dct.check_forward(
        pos_enc.PositionalEncoding(), torch.randn(2, 5, pos_enc.WIDTH)
    )
    assert_matches_snapshot("pos_enc_summary", report.one_line_summary() + "\n")


def test_inventory_text():
    assert_matches_snapshot("inventory", str(dct.inspect(encoder.Encoder())))


def test_assert_clean_raises_with_the_rendered_report():
    report = dct.check_forward(mask.SelfAttention(4), torch.randn(2, 5, 4))
    with pytest.raises(AssertionError) as raised:
        dct.assert_clean(report)
    assert str(raised.value) == "\n" + str(report)
    clean = dct.check_forward(mask.SelfAttentionFixed(4), torch.randn(2, 5, 4))
    dct.assert_clean(clean)
    assert (
        str(clean).splitlines()[2]
        == "  × dry run of `SelfAttentionFixed` on fake cuda:0: no problems"
    )
    with pytest.raises(TypeError, match="takes a devcheck report"):
        dct.assert_clean("not a report")


def test_json_carries_every_finding():
    report = dct.check_forward(mask.SelfAttention(4), torch.randn(2, 5, 4))
    data = report.to_json()
    assert data["ok"] is False
    assert [f["code"] for f in data["findings"]] == [
        "created-off-device",
        "device-mismatch",
    ]
    first = data["findings"][0]
    assert first["path"] == "python/tests/culprits/mask.py"
    assert {
        "line",
        "column",
        "end_line",
        "end_column",
        "help",
        "severity",
        "count",
    } <= first.keys()
