"""Dataset plugins and their loading: synthetic data is deterministic and learnable, the real
loaders read tiny copies written into ``tmp_path`` (nothing is downloaded), and every user
mistake ends in a ConfigError/PluginError that names the field."""

from __future__ import annotations

import pickle
import re
import time
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from imagefolders import write_fake_cifar, write_image_folder

from distrepro.data.loading import DatasetBundle, build_dataset, load_dataset_plugin
from distrepro.errors import ConfigError, PluginError
from distrepro.training.models import build_model

pytestmark = pytest.mark.smoke

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
PLUGINS = ("synthetic", "cifar10", "imagenet100")


def plugin(name: str) -> types.ModuleType:
    return load_dataset_plugin(DATASETS / f"{name}.py")


# --------------------------------------------------------------------------- plugin loading


@pytest.mark.parametrize("name", PLUGINS)
def test_plugin_contract(name: str) -> None:
    mod = plugin(name)
    assert mod.__name__ == f"_distrepro_datasets.{name}"
    assert name == mod.NAME
    assert isinstance(mod.DESCRIPTION, str) and len(mod.DESCRIPTION) > 20
    defaults = mod.Params()  # the defaults validate
    # registered under its private name, so its objects pickle (spawned worker processes)
    assert pickle.loads(pickle.dumps(defaults)) == defaults
    with pytest.raises(Exception, match="Extra inputs are not permitted"):
        mod.Params(no_such_option=1)


def test_no_importable_datasets_package() -> None:
    # loading by path is the point: a datasets/__init__.py would shadow Hugging Face's `datasets`
    assert not (DATASETS / "__init__.py").exists()


def test_load_plugin_errors(tmp_path: Path) -> None:
    with pytest.raises(PluginError, match="not found"):
        load_dataset_plugin(tmp_path / "nope.py")
    broken = tmp_path / "broken.py"
    broken.write_text("def build(:\n")
    with pytest.raises(PluginError, match="failed to import: SyntaxError"):
        load_dataset_plugin(broken)
    partial = tmp_path / "partial.py"
    partial.write_text("NAME = 'partial'\nDESCRIPTION = 'x'\n")
    with pytest.raises(PluginError, match="does not define Params, build"):
        load_dataset_plugin(partial)


def test_build_dataset_rejects_what_is_not_a_bundle(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pydantic\nNAME = 'bad'\nDESCRIPTION = 'x'\n"
        "class Params(pydantic.BaseModel):\n    pass\n"
        "def build(params, root, seed):\n    return 42\n"
    )
    with pytest.raises(PluginError, match="returned int"):
        build_dataset(load_dataset_plugin(bad), {}, None, 0)


def test_bad_params_name_the_field() -> None:
    syn = plugin("synthetic")
    with pytest.raises(ConfigError) as info:
        build_dataset(syn, {"num_clases": 10}, None, 0, source="run.yaml")
    assert info.value.field == "dataset.params.num_clases"
    assert "run.yaml" in str(info.value)
    with pytest.raises(ConfigError) as info:
        build_dataset(syn, {"noise": -1.0}, None, 0)
    assert info.value.field == "dataset.params.noise"


# --------------------------------------------------------------------------- synthetic


def test_synthetic_is_deterministic_in_the_seed() -> None:
    syn = plugin("synthetic")
    a = build_dataset(syn, {}, None, 7)
    b = build_dataset(syn, {}, None, 7)
    c = build_dataset(syn, {}, None, 8)
    assert a.train_tensors is not None and b.train_tensors is not None and c.train_tensors is not None
    assert a.test_tensors is not None and b.test_tensors is not None
    assert torch.equal(a.train_tensors[0], b.train_tensors[0])
    assert torch.equal(a.train_tensors[1], b.train_tensors[1])
    assert torch.equal(a.test_tensors[0], b.test_tensors[0])
    assert not torch.equal(a.train_tensors[0], c.train_tensors[0])
    assert not torch.equal(a.train_tensors[1], c.train_tensors[1])


def test_synthetic_shapes_normalisation_and_speed() -> None:
    syn = plugin("synthetic")
    start = time.process_time()  # CPU time: wall time on a loaded machine measures the neighbours
    bundle = build_dataset(syn, {}, None, 0)
    elapsed = time.process_time() - start
    assert elapsed < 6.0, f"generating 4096 samples took {elapsed:.2f} s of CPU"
    assert isinstance(bundle, DatasetBundle)
    assert bundle.train_tensors is not None and bundle.test_tensors is not None
    x, y = bundle.train_tensors
    assert x.shape == (4096, 3, 16, 16) and x.dtype == torch.float32
    assert y.shape == (4096,) and y.dtype == torch.int64
    assert bundle.test_tensors[0].shape == (1024, 3, 16, 16)
    assert bundle.input_shape == (3, 16, 16) and bundle.num_classes == 10
    # per-channel zero mean / unit variance on the training split
    assert torch.allclose(x.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-4)
    assert torch.allclose(x.std(dim=(0, 2, 3)), torch.ones(3), atol=1e-3)
    # balanced classes
    assert torch.bincount(y, minlength=10).tolist() == [410] * 6 + [409] * 4
    # the map-style dataset returns what the fast path holds
    xi, yi = bundle.train[5]
    assert torch.equal(xi, x[5]) and int(yi) == int(y[5])


def test_synthetic_hundred_classes() -> None:
    bundle = build_dataset(plugin("synthetic"), {"num_classes": 100, "image_size": 32}, None, 1)
    assert bundle.num_classes == 100 and bundle.input_shape == (3, 32, 32)
    assert bundle.train_tensors is not None
    x, y = bundle.train_tensors
    assert x.shape == (4096, 3, 32, 32)
    assert set(y.tolist()) == set(range(100))


def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def test_synthetic_is_learnable_but_not_trivial() -> None:
    bundle = build_dataset(plugin("synthetic"), {"train_size": 512, "test_size": 512}, None, 3)
    assert bundle.train_tensors is not None and bundle.test_tensors is not None
    x, y = bundle.train_tensors
    xt, yt = bundle.test_tensors
    torch.manual_seed(0)
    model = build_model("small_cnn", 10, bundle.input_shape)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(0)
    after_one = 0.0
    threads = torch.get_num_threads()
    # One intra-op thread: this model is tiny, and OpenMP threads on a busy CI machine can make each
    # step 100x slower (measured: 0.2 s -> 28 s for this loop with 2 threads under a load of 3).
    torch.set_num_threads(1)
    try:
        for step in range(60):
            idx = torch.randint(0, x.shape[0], (32,), generator=gen)
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
            if step == 0:
                after_one = _accuracy(model, xt, yt)
        final = _accuracy(model, xt, yt)
    finally:
        torch.set_num_threads(threads)
    assert after_one < 0.3, f"one step already reaches {after_one:.2f}: the task is trivial"
    assert final >= 0.5, f"small_cnn reached only {final:.2f} (chance 0.1)"


# --------------------------------------------------------------------------- cifar10


def test_cifar10_loads_a_local_copy(tmp_path: Path) -> None:
    rows = write_fake_cifar(tmp_path)
    mod = plugin("cifar10")
    bundle = build_dataset(mod, {"verify_checksums": False}, tmp_path, 0)
    assert bundle.num_classes == 10 and bundle.input_shape == (3, 32, 32)
    assert bundle.train_tensors is not None and bundle.test_tensors is not None
    x, y = bundle.train_tensors
    assert x.shape == (20, 3, 32, 32) and x.dtype == torch.float32
    assert y.tolist() == [(b * 4 + i) % 10 for b in range(1, 6) for i in range(4)]
    assert bundle.test_tensors[1].tolist() == [0, 1, 2, 3]
    # row layout of the real format: 1024 red, then green, then blue values, each row-major
    n, c, h, w = 7, 2, 5, 9
    raw = float(rows[n, c * 1024 + h * 32 + w])
    expected = (raw / 255.0 - mod.MEAN[c]) / mod.STD[c]
    assert float(x[n, c, h, w]) == pytest.approx(expected, abs=1e-6)


def test_cifar10_augmented_train_split_goes_through_transforms(tmp_path: Path) -> None:
    write_fake_cifar(tmp_path)
    bundle = build_dataset(plugin("cifar10"), {"verify_checksums": False, "augment": True}, tmp_path, 0)
    assert bundle.train_tensors is None and bundle.test_tensors is not None
    torch.manual_seed(0)
    x, y = bundle.train[3]
    assert isinstance(x, torch.Tensor) and x.shape == (3, 32, 32) and x.dtype == torch.float32
    assert int(y) == (1 * 4 + 3) % 10


def test_cifar10_augmentation_is_torchvisions_pipeline_bit_for_bit(tmp_path: Path) -> None:
    """The uint8 restatement draws what torchvision's RandomCrop + RandomHorizontalFlip draw, in their order,
    and computes what ToDtype + Normalize compute: same seed, same items, equal tensors (and both flips seen)."""
    write_fake_cifar(tmp_path, per_batch=8)
    mod = plugin("cifar10")
    bundle = build_dataset(mod, {"verify_checksums": False, "augment": True}, tmp_path, 0)
    reference = mod._dataset_class(False)(str(tmp_path), train=True, transform=mod._augment_transform())
    torch.manual_seed(3)
    ours = [bundle.train[i % 40] for i in range(200)]
    torch.manual_seed(3)
    theirs = [reference[i % 40] for i in range(200)]
    assert all(torch.equal(a[0], b[0]) and a[1] == b[1] for a, b in zip(ours, theirs, strict=True))
    plain = build_dataset(mod, {"verify_checksums": False}, tmp_path, 0).train_tensors
    assert plain is not None
    torch.manual_seed(3)  # item 0 by hand: pad with the value a black pixel normalises to, crop, maybe flip
    top, left, flip = int(torch.randint(0, 9, ())), int(torch.randint(0, 9, ())), bool(torch.rand(1) < 0.5)
    black = torch.tensor([-m / s for m, s in zip(mod.MEAN, mod.STD, strict=True)]).view(3, 1, 1)
    padded = black.expand(3, 40, 40).clone()
    padded[:, 4:36, 4:36] = plain[0][0]
    expected = padded[:, top : top + 32, left : left + 32]
    assert torch.allclose(ours[0][0], expected.flip(-1) if flip else expected, atol=1e-5)


def test_cifar10_checksums_fail_clearly_on_a_non_official_copy(tmp_path: Path) -> None:
    write_fake_cifar(tmp_path)
    with pytest.raises(ConfigError, match="verify_checksums: false") as info:
        build_dataset(plugin("cifar10"), {}, tmp_path, 0)
    assert info.value.field == "dataset.root"


def test_cifar10_missing_root_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_dataset(plugin("cifar10"), {}, tmp_path / "data", 0)
    assert info.value.field == "dataset.root"
    assert "cifar-10-batches-py" in info.value.message and "download: true" in info.value.message
    with pytest.raises(ConfigError, match=r"dataset\.root"):
        build_dataset(plugin("cifar10"), {}, None, 0)


# --------------------------------------------------------------------------- imagenet100


def test_imagenet100_class_list() -> None:
    classes = plugin("imagenet100").IMAGENET100_CLASSES
    assert len(classes) == 100 and len(set(classes)) == 100
    assert all(re.fullmatch(r"n\d{8}", c) for c in classes)
    # first and last entries of imagenet100.txt in github.com/HobbitLong/CMC
    assert classes[0] == "n02869837" and classes[-1] == "n02090622"


def test_imagenet100_loads_any_class_folders_when_not_strict(tmp_path: Path) -> None:
    write_image_folder(tmp_path, ["n03000000", "n01000000", "n02000000"], per_class=2)
    params = {"image_size": 16, "strict_classes": False}
    bundle = build_dataset(plugin("imagenet100"), params, tmp_path, 0)
    assert bundle.num_classes == 3 and bundle.input_shape == (3, 16, 16)
    assert bundle.train_tensors is None
    assert len(bundle.train) == 6 and len(bundle.test) == 6  # type: ignore[arg-type]
    x, y = bundle.train[0]
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32
    assert y == 0  # sorted wnids: n01000000 is class 0
    assert [bundle.test[i][1] for i in range(6)] == [0, 0, 1, 1, 2, 2]
    assert pickle.loads(pickle.dumps(bundle.test))[3][1] == 1  # a plain ImageFolder: picklable
    augmented = build_dataset(plugin("imagenet100"), {**params, "augment": True}, tmp_path, 0)
    assert augmented.train[5][0].shape == (3, 16, 16)


def test_imagenet100_strict_uses_the_standard_classes(tmp_path: Path) -> None:
    classes = list(plugin("imagenet100").IMAGENET100_CLASSES)
    write_image_folder(tmp_path, classes, per_class=1, size=(8, 8))
    bundle = build_dataset(plugin("imagenet100"), {"image_size": 8}, tmp_path, 0)
    assert bundle.num_classes == 100
    label_of = {Path(path).parent.name: label for path, label in bundle.train.samples}  # type: ignore[attr-defined]
    assert label_of == {name: i for i, name in enumerate(sorted(classes))}


def test_imagenet100_errors_name_the_root(tmp_path: Path) -> None:
    mod = plugin("imagenet100")
    with pytest.raises(ConfigError, match="no 'train/' folder") as info:
        build_dataset(mod, {}, tmp_path, 0)
    assert info.value.field == "dataset.root"
    write_image_folder(tmp_path, ["n02869837", "n01749939"], per_class=1)
    with pytest.raises(ConfigError, match="98 missing") as info:
        build_dataset(mod, {}, tmp_path, 0)
    assert info.value.field == "dataset.root" and "strict_classes: false" in info.value.message
    (tmp_path / "val" / "n09999999").mkdir()
    with pytest.raises(ConfigError, match="1 unexpected"):
        build_dataset(mod, {"strict_classes": False}, tmp_path, 0)
    with pytest.raises(ConfigError, match=r"dataset\.root"):
        build_dataset(mod, {}, None, 0)
    # from a run config, the error names the config file (what the user edits) and keeps the folder
    with pytest.raises(ConfigError, match="1 unexpected") as info:
        build_dataset(mod, {"strict_classes": False}, tmp_path, 0, source="run.yaml")
    assert info.value.source == "run.yaml" and str(tmp_path) in info.value.message
