"""A paper's hooks speak for themselves: a product's caption is what its ``products.py`` declares
(``describe(ctx)`` -> :class:`distrepro.api.Product`), and a section's context is the one the report's caller made.
The report names no product and makes no training context of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from test_report import ROOT, SYNTH_CLAIMS, synthetic_runset

from distrepro.api import ClaimView, EvalPoint
from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.report.build import write_report
from distrepro.report.plugin_context import ReadingContext

PLAIN_METHOD = """\
from distrepro import api


class Method(api.Method[api.MethodParams]):
    synchronous = True

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        raise AssertionError("no arm runs this method")
"""

HALO_PRODUCTS = """\
from pathlib import Path

from distrepro import api


def build(ctx: api.ReportContext) -> list[Path]:
    raise AssertionError("the report never builds a product: it may train")


def describe(ctx: api.ReportContext) -> list[api.Product]:
    return [api.Product("halo.png", f"A halo of emulated numbers, drawn for the {ctx.scale} scale")]
"""

TRAINING_SECTION = """\
from distrepro import api


def section(ctx: api.ReportContext):
    evals = ctx.train({"name": "probe"})
    return f"## Probe\\n\\nlast step {evals[-1].step} after {evals[-1].emulated_s} s\\n", {}
"""


def _plugin(root: Path, name: str, **modules: str) -> Path:
    folder = root / "methods" / name
    folder.mkdir(parents=True)
    (folder / "method.py").write_text(PLAIN_METHOD)
    for module, text in modules.items():
        (folder / f"{module}.py").write_text(text)
    return folder


def _png(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path, dpi=20)
    plt.close(fig)


def _synth(*method_dirs: Path) -> PaperInfo:
    return PaperInfo("synth", validate_paper(SYNTH_CLAIMS), method_dirs=list(method_dirs))


def test_a_products_declared_caption_is_shown_without_the_report_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "root"
    folder = _plugin(root, "halo_method", products=HALO_PRODUCTS)
    out = tmp_path / "out"
    out.mkdir()
    _png(out / "halo.png")
    (out / "halo.csv").write_text("x\n1\n")
    _png(out / "stray.png")  # a file no hook declares keeps the caption that names the hook

    md = write_report(_synth(folder), synthetic_runset(), out, root=root).markdown.read_text()

    assert (
        "![halo](halo.png)\n\n_A halo of emulated numbers, drawn for the proxy scale; its numbers: `halo.csv`._" in md
    )
    assert "_`stray.png`, written by the paper's products hook (`products.py` in its method folder)._" in md
    report_code = [p.read_text() for p in (ROOT / "distrepro" / "report").rglob("*.py")]
    assert not [text for text in report_code if "fig6" in text or "halo" in text]  # no product named there


def test_decentdp_declares_the_fig6_caption_the_report_showed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    _png(out / "fig6.png")
    (out / "fig6.csv").write_text("setup,gpus,method,ms_per_iter,steps\n")

    md = write_report(_synth(ROOT / "methods" / "decentdp"), synthetic_runset(), out).markdown.read_text()

    assert (
        "_Decent-DP Fig. 6 as the emulator predicts it: emulated milliseconds per iteration (Transformer-base, "
        "25K tokens per iteration) by GPU count, per method, on three emulated clusters; its numbers: `fig6.csv`._"
    ) in md


class _ReplayingContext(ReadingContext):
    """A harness's context as a caller above the report would hand it: ``train`` answers without training."""

    made: ClassVar[list[tuple[Path, str, tuple[str, ...]]]] = []

    def __init__(self, out_dir: Path, fig_dir: Path, scale: str, claims: Sequence[ClaimView]) -> None:
        super().__init__(out_dir, fig_dir, scale, claims)
        self.made.append((out_dir, scale, tuple(c.id for c in claims)))

    def train(self, config: Mapping[str, Any]) -> list[EvalPoint]:
        return [EvalPoint(0, 0.0), EvalPoint(8, 2.5)]


def test_a_sections_context_is_the_one_the_caller_hands_the_report(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "root"
    folder = _plugin(root, "probe_method", report=TRAINING_SECTION)
    monkeypatch.setenv("DISTREPRO_PATH", str(root))  # a user root: sections are loaded over every root
    info = _synth(folder)

    made = write_report(info, synthetic_runset(), tmp_path / "out", root=root, make_context=_ReplayingContext)
    assert "## Probe\n\nlast step 8 after 2.5 s" in made.markdown.read_text()
    assert _ReplayingContext.made == [(tmp_path / "out", "proxy", tuple(c["id"] for c in SYNTH_CLAIMS["claims"]))]

    alone = write_report(info, synthetic_runset(), tmp_path / "alone", root=root).markdown.read_text()
    assert "_The report section of `probe_method` failed: the report's hook context cannot train a run" in alone
