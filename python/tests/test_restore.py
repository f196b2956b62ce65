"""The model comes back exactly as it was, also when forward raises (the exception propagates),
and nothing of the dry run (the mode, the patched torch.cuda functions, cuDNN's flag, the
optimizer hook, the random number generator's state) outlives the call."""

import devcheck.torch as dct
import pytest
import torch
import torch.nn.functional as F
from helpers import ModelSnapshot
from torch import nn
from torch.optim.optimizer import _global_optimizer_pre_hooks
from torch.overrides import _get_current_function_mode_stack


class Busy(nn.Module):
    """A forward that changes everything it can reach, then (optionally) raises."""

    def __init__(self, fail=False):
        super().__init__()
        self.fail = fail
        self.bn = nn.BatchNorm1d(4)
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)
        self.cache = []
        self.steps = 0
        self.counter = torch.zeros(())

    def forward(self, x):
        self.steps += 1
        self.cache.append(x)
        self.extra = torch.ones(2)
        self.counter += 1
        x.mul_(2)
        h = self.drop(self.bn(x))
        with torch.no_grad():
            self.fc.weight.mul_(2)
        self.fc.weight.requires_grad_(False)
        self.register_buffer("late", torch.zeros(1))
        self.fc.register_forward_hook(lambda *args: None)
        self.bn.eval()
        if self.fail:
            raise ValueError("forward failed on purpose")
        return self.fc(h)


def dry_run_state():
    return {
        "modes": list(_get_current_function_mode_stack()),
        "is_available": torch.cuda.is_available,
        "device_count": torch.cuda.device_count,
        "current_device": torch.cuda.current_device,
        "synchronize": torch.cuda.synchronize,
        "cudnn": torch.backends.cudnn.enabled,
        "optimizer_hooks": dict(_global_optimizer_pre_hooks),
    }


@pytest.mark.parametrize("fail", [False, True])
def test_forward_changes_are_undone_and_nothing_leaks(fail):
    model = Busy(fail)
    model.train()
    x = torch.randn(3, 4)
    x_before = x.clone()
    before = ModelSnapshot(model)
    cache, counter = model.cache, model.counter
    counter_value = counter.clone()
    hooks_before = dict(model.fc._forward_hooks)
    state = dry_run_state()
    rng = torch.get_rng_state()
    available = torch.cuda.is_available()

    if fail:
        with pytest.raises(ValueError, match="forward failed on purpose"):
            dct.check_forward(model, x)
    else:
        report = dct.check_forward(model, x)
        # `counter` is a plain tensor attribute: `.to()` would leave it on the CPU. The tensors
        # forward makes on the CPU and never mixes with the target's are notes.
        problems = [f.code for f in report.findings if f.severity != "note"]
        assert problems == ["unmoved-attribute"], report

    before.assert_unchanged()
    assert model.cache is cache and cache == []
    assert model.steps == 0
    assert not hasattr(model, "extra")
    assert model.counter is counter and torch.equal(counter, counter_value)
    assert "late" not in model._buffers
    assert dict(model.fc._forward_hooks) == hooks_before
    assert model.bn.training and model.training
    assert model.fc.weight.requires_grad
    assert torch.equal(x, x_before), "the caller's input was written"
    assert dry_run_state() == state
    assert torch.equal(torch.get_rng_state(), rng)
    # Outside the run, devices are real again.
    assert torch.ones(1).device.type == "cpu"
    assert torch.cuda.is_available() == available


def test_step_that_raises_after_backward_restores_gradients_and_optimizer():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
    F.cross_entropy(model(x), y).backward()  # gradients the caller has not used yet
    before = ModelSnapshot(model)
    state = dry_run_state()

    def step(model, x, y):
        x, y = x.to("cuda"), y.to("cuda")
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        raise RuntimeError("logging failed")

    with pytest.raises(RuntimeError, match="logging failed"):
        dct.check_step(step, model, x, y)
    before.assert_unchanged()
    assert len(optimizer.state) == 0
    assert dry_run_state() == state


def test_tied_weights_stay_tied_and_identical():
    embed = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = embed.weight
    model = nn.ModuleDict({"embed": embed, "head": head})

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.parts = model

        def forward(self, ids):
            return self.parts["head"](self.parts["embed"](ids))

    tied = Tied()
    before = ModelSnapshot(tied)
    dct.assert_clean(dct.check_forward(tied, torch.randint(0, 10, (2, 3))))
    before.assert_unchanged()
    assert tied.parts["head"].weight is tied.parts["embed"].weight


def test_the_device_a_user_reads_is_the_target_inside_and_real_outside():
    seen = {}
    available = torch.cuda.is_available()

    class Reader(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            seen["x"] = (x.device, x.is_cuda, x.get_device())
            seen["param"] = next(self.parameters()).device
            seen["available"] = torch.cuda.is_available()
            seen["count"] = torch.cuda.device_count()
            seen["made"] = torch.zeros(1, device=x.device).device
            seen["moved"] = torch.ones(1).to(x.device).is_cuda
            seen["cpu"] = x.cpu().device
            return self.fc(x)

    report = dct.check_forward(Reader(), torch.randn(1, 2), device="cuda:1")
    assert seen["x"] == (torch.device("cuda:1"), True, 1)
    assert seen["param"] == torch.device("cuda:1")
    assert seen["available"] is True
    assert seen["count"] == 2
    assert seen["made"] == torch.device("cuda:1")
    assert seen["moved"] is True
    assert seen["cpu"] == torch.device("cpu")
    # `torch.ones(1).to(x.device)` works, at the price of a copy: a note; `x.cpu()` waits for
    # the device: a warning.
    assert report.codes() == ["created-off-device", "host-read"], report
    assert [f.severity for f in report.findings] == ["note", "warning"]
    # The caller asks the machine again after the run, and gets its answer.
    assert torch.cuda.is_available() == available


def test_a_model_not_on_the_cpu_is_refused_with_help():
    model = nn.Linear(2, 2).to("meta")
    with pytest.raises(ValueError, match="the dry run computes on the CPU") as raised:
        dct.check_forward(model, torch.randn(1, 2))
    assert "\nhelp: dry-run the model as built or loaded on the CPU" in str(
        raised.value
    )


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="unknown device 'gpu'.*\n.*help:"):
        dct.check_forward(nn.Linear(2, 2), torch.randn(1, 2), device="gpu")
    with pytest.raises(TypeError, match="takes a torch.nn.Module, not function"):
        dct.check_forward(lambda x: x, torch.randn(1, 2))
    with pytest.raises(TypeError, match="takes the step first"):
        dct.check_step(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(TypeError, match="takes a torch.nn.Module, not list"):
        dct.inspect([nn.Linear(2, 2)])


def test_gradients_and_helpers_are_on_the_target_where_the_step_reads_them():
    seen = {}

    def step(model, x):
        x = x.cuda(non_blocking=True)
        loss = model(x).sum()
        loss.backward()
        weight = model[0].weight
        seen["grad"] = (weight.grad.device, weight.grad.is_cuda)
        (bias_grad,) = torch.autograd.grad(model(x).sum(), [model[0].bias])
        seen["autograd.grad"] = bias_grad.device
        with torch.device(
            x.device
        ):  # torch's own device context, on top of the dry run's mode
            seen["context"] = torch.ones(2).device
        seen["as_tensor"] = torch.as_tensor(torch.ones(2), device="cuda").device
        seen["pinned"] = torch.ones(2).pin_memory().device
        seen["half"] = x.half().device
        return loss.detach()

    model = nn.Sequential(nn.Linear(3, 2))
    report = dct.check_step(step, model, torch.randn(4, 3))
    cuda = torch.device("cuda:0")
    assert seen == {
        "grad": (cuda, True),
        "autograd.grad": cuda,
        "context": cuda,
        "as_tensor": cuda,
        "pinned": torch.device("cpu"),
        "half": cuda,
    }
    # `torch.ones(2)` copied to the target by `as_tensor` works (a note); the pinned one stays
    # on the CPU and never meets the target (a note too).
    assert [(f.code, f.severity) for f in report.findings] == [
        ("created-off-device", "note")
    ] * 2
    assert "then copied to cuda:0" in report.findings[0].details[1]
