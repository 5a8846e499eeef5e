"""Models by name (shapes, parameter counts, clear errors) and the FLOP/byte figures of distrepro.hardware.flops."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from distrepro.errors import ConfigError
from distrepro.hardware.flops import param_bytes, train_flops_per_sample
from distrepro.training.models import MODEL_NAMES, build_model

pytestmark = pytest.mark.smoke

# Parameter counts for 3 input channels and 10 classes, derived by hand:
#   small_cnn: conv1 3·32·9+32 = 896, conv2 32·64·9+64 = 18,496, fc1 1024·80+80 = 82,000, fc2 80·10+10 = 810
#   cnn1d (on (3, 1, L) signals): conv1 3·32·5+32 = 512, conv2 and conv3 32·32·3+32 = 3,104 each,
#   fc 160·10+10 = 1,610
#   resnet18_cifar: kuangliu/pytorch-cifar's ResNet18() has 11,173,962
#   resnet18 / resnet50: torchvision's 11,689,512 / 25,557,032 at 1000 classes, minus 990 rows of the fc
#   layer (512 resp. 2048 weights + 1 bias each)
#   resnet152 / vit_b_16: torchvision's 60,192,808 / 86,567,656 at 1000 classes, minus 990 rows of the head
#   (2048 resp. 768 weights + 1 bias each)
PARAMS_10_CLASSES = {
    "small_cnn": 102_202,
    "cnn1d": 512 + 2 * 3_104 + 1_610,
    "resnet18_cifar": 11_173_962,
    "resnet18": 11_689_512 - 990 * 513,
    "resnet50": 25_557_032 - 990 * 2049,
    "resnet152": 60_192_808 - 990 * 2049,
    "vit_b_16": 86_567_656 - 990 * 769,
}
#: paper-scale models (plans and time charges): counted and run on the meta device, shapes only
LARGE = {"resnet152": 32, "vit_b_16": 224}
#: models of 1D signals, (C, 1, L)
SIGNALS = {"cnn1d"}


def _shape(name: str, size: int) -> tuple[int, int, int]:
    return (3, 1, size) if name in SIGNALS else (3, size, size)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_model_names() -> None:
    assert set(MODEL_NAMES) == set(PARAMS_10_CLASSES)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_parameter_counts(name: str) -> None:
    size = LARGE.get(name, 32)
    with torch.device("meta" if name in LARGE else "cpu"):
        assert n_params(build_model(name, 10, _shape(name, size))) == PARAMS_10_CLASSES[name]


@pytest.mark.parametrize("name", sorted(LARGE))
def test_large_models_run_on_the_meta_device(name: str) -> None:
    size = LARGE[name]
    with torch.device("meta"):
        out = build_model(name, 7, (3, size, size))(torch.randn(2, 3, size, size))
    assert out.shape == (2, 7)


def test_vit_refuses_small_images_in_one_line() -> None:
    with pytest.raises(ConfigError, match="at least 224×224"):
        build_model("vit_b_16", 10, (3, 32, 32))


@pytest.mark.parametrize("size", [16, 32])
@pytest.mark.parametrize("name", [n for n in MODEL_NAMES if n not in LARGE])
def test_output_shapes(name: str, size: int) -> None:
    torch.manual_seed(0)
    params = {"width": 8} if name == "resnet18_cifar" else {}
    model = build_model(name, 7, _shape(name, size), **params)
    batch = 2 if name == "resnet50" else 4
    with torch.no_grad():
        out = model(torch.randn(batch, *_shape(name, size)))  # train mode: BatchNorm uses batch statistics
    assert out.shape == (batch, 7)
    assert torch.isfinite(out).all()


def test_small_cnn_size_independence_and_limits() -> None:
    small = build_model("small_cnn", 10, (1, 8, 8))
    assert build_model("small_cnn", 10, (1, 64, 64)).fc1.in_features == small.fc1.in_features == 1024
    assert small(torch.randn(2, 1, 8, 8)).shape == (2, 10)
    assert n_params(build_model("small_cnn", 10, (3, 16, 16), hidden=20)) == 896 + 18_496 + 20_500 + 210
    with pytest.raises(ConfigError, match="at least 8×8"):
        build_model("small_cnn", 10, (3, 4, 4))


def test_cnn1d_takes_signals_of_any_length_and_refuses_images() -> None:
    model = build_model("cnn1d", 10, (1, 1, 40))
    assert n_params(model) == n_params(build_model("cnn1d", 10, (1, 1, 100)))  # adaptive pool: L-independent
    assert model(torch.randn(2, 1, 1, 40)).shape == (2, 10)
    with pytest.raises(ConfigError, match=r"\(C, 1, L ≥ 8\)"):
        build_model("cnn1d", 10, (1, 8, 8))


def test_thin_resnet_and_other_channel_counts() -> None:
    thin = build_model("resnet18_cifar", 10, (3, 32, 32), width=16)
    assert n_params(thin) < PARAMS_10_CLASSES["resnet18_cifar"] / 10
    gray = build_model("resnet18", 10, (1, 32, 32))
    assert gray.conv1.in_channels == 1
    assert gray(torch.randn(2, 1, 32, 32)).shape == (2, 10)


def test_unknown_model_and_bad_params_name_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        build_model("vgg11", 10, (3, 32, 32))
    assert info.value.field == "model.name"
    assert "unknown model 'vgg11'" in info.value.message and "resnet18_cifar" in info.value.message
    with pytest.raises(ConfigError) as info:
        build_model("resnet18_cifar", 10, (3, 32, 32), widht=8)
    assert info.value.field == "model.params.widht"
    with pytest.raises(ConfigError) as info:
        build_model("resnet18", 10, (3, 32, 32), width=8)  # torchvision models take no options
    assert info.value.field == "model.params.width"


# --------------------------------------------------------------------------- flops


def test_flops_of_one_linear_layer() -> None:
    # nn.Linear(10, 5) on a batch of B: forward addmm(bias, x[B,10], W^T[10,5]) = 2·B·10·5 FLOPs.
    # Backward: the weight gradient mm(x^T, grad_out) = 2·10·B·5; the input does not require a
    # gradient, so autograd skips grad_x (and FlopCounterMode counts nothing for it); the bias
    # gradient is a sum, which FlopCounterMode does not count. Per sample: 100 + 100 = 200.
    assert train_flops_per_sample(nn.Linear(10, 5), (10,)) == 200.0


def test_flops_count_input_gradients_of_deeper_layers() -> None:
    # second layer Linear(5, 3): forward 30, weight grad 30, and now an input grad (30) because its
    # input comes from a layer with parameters: 200 + 3·30 = 290
    model = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 3))
    assert train_flops_per_sample(model, (10,)) == 290.0


def test_flops_of_a_convolution() -> None:
    # Conv2d(1→2, 3×3) on 1×5×5: 2 output channels × 3×3 positions × 9 MACs = 162 MACs = 324 FLOPs
    # forward, the same again for the weight gradient, no input gradient: 648
    assert train_flops_per_sample(nn.Conv2d(1, 2, 3, bias=False), (1, 5, 5)) == 648.0


def test_flops_of_small_cnn_by_hand() -> None:
    # 16 px: conv1 out 32×16×16, 27 MACs each (fwd + weight grad); conv2 out 64×8×8, 288 MACs
    # (fwd + weight + input grads); fc1 1024·80 and fc2 80·10 MACs (×3 each); ×2 FLOPs per MAC
    expected = 2 * (2 * 32 * 256 * 27 + 3 * 64 * 64 * 288 + 3 * 1024 * 80 + 3 * 80 * 10)
    assert expected == 8_458_944
    assert train_flops_per_sample(build_model("small_cnn", 10, (3, 16, 16)), (3, 16, 16)) == expected


def test_flops_leave_the_model_unchanged() -> None:
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    model.eval()
    model[0].train()  # mixed flags must come back as they were
    sentinel = torch.full_like(model[3].weight, 7.0)
    model[3].weight.grad = sentinel
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert train_flops_per_sample(model, (3, 8, 8)) > 0
    assert [m.training for m in model] == [True, False, False, False]
    assert model[3].weight.grad is sentinel
    assert model[0].weight.grad is None
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # incl. BatchNorm running stats


def test_param_bytes() -> None:
    assert param_bytes(nn.Linear(10, 5)) == 55 * 4
    # BatchNorm2d(4): weight, bias, running_mean, running_var (4 float32 each) + num_batches_tracked (int64)
    assert param_bytes(nn.BatchNorm2d(4)) == 4 * 4 * 4 + 8
    assert param_bytes(nn.Linear(10, 5).half()) == 55 * 2
    shared = nn.Linear(4, 4)
    assert param_bytes(nn.Sequential(shared, shared)) == 20 * 4
    assert param_bytes(build_model("small_cnn", 10, (3, 32, 32))) == PARAMS_10_CLASSES["small_cnn"] * 4
