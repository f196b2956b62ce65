"""`dct.syncs()`: host syncs of a real GPU run per user line. Without CUDA it refuses with a
clear error; the GPU test runs only where CUDA is."""

import warnings

import devcheck.torch as dct
import pytest
import torch
from devcheck.torch._syncs import SYNC_WARNING, SyncLedger

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"
)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU")
def test_without_a_gpu_syncs_says_so():
    with pytest.raises(RuntimeError) as raised:
        dct.syncs()
    text = str(raised.value)
    assert text.startswith(
        "devcheck.torch.syncs() records the host syncs of a real run on a GPU, and "
        "torch.cuda.is_available() is False on this machine"
    )
    assert "\nhelp: run it where a CUDA GPU is available" in text


def test_the_ledger_counts_sync_warnings_per_user_line_and_passes_others_on():
    # The same catching the GPU path uses, fed torch's sync-debug warning by hand.
    with warnings.catch_warnings(record=True) as others:
        warnings.simplefilter("always")
        with SyncLedger(use_cuda=False) as ledger:
            for _ in range(3):
                warnings.warn(f"{SYNC_WARNING} (sync)", UserWarning, stacklevel=1)
            warnings.warn("something else", UserWarning, stacklevel=1)
    assert ledger.total == 3
    (entry,) = ledger.entries
    assert entry.site.filename == __file__
    assert (
        entry.code
        == 'warnings.warn(f"{SYNC_WARNING} (sync)", UserWarning, stacklevel=1)'
    )
    assert [str(w.message) for w in others] == ["something else"]
    text = str(ledger)
    assert text.startswith("host syncs: 3 at 1 line\n  call site")
    assert ledger.to_json()["sites"][0]["count"] == 3


@needs_cuda
def test_item_in_a_loop_is_counted_at_its_line():
    x = torch.randn(8, device="cuda")
    with dct.syncs() as ledger:
        total = 0.0
        for _ in range(5):
            total += x.sum().item()
    assert ledger.total >= 5
    lines = {entry.code: entry.count for entry in ledger.entries}
    assert lines["total += x.sum().item()"] == 5
    assert torch.cuda.get_sync_debug_mode() == 0
