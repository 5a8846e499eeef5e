"""Report figures stay readable from 2 to 30 arms, with one colour per arm across every figure.

Built from a synthetic run table (no MLflow, no training): arms named like Chao's
(``adaptive-slowdown``), on several emulated clusters of 2 to 8 workers, with curves, allocation
histories, timelines and claims of every plotted kind. Each PNG's pixel size must stay bounded;
each figure is read back from matplotlib (a recorder wraps ``Figure.savefig``) to check that no two
texts overlap (tick labels, axis labels, titles, legend entries), that legends stay off the data
area, and that the arm-coloured artists (``gid="arm:<name>"``) give every arm one colour in every
figure and different arms different colours.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from figure_text import legends_over_data, overlapping_texts, texts_cut_off
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from timelines import timeline_csv

from distrepro.claims.papers import PaperInfo
from distrepro.claims.runs import RunSet
from distrepro.claims.schema import validate_paper
from distrepro.report.build import write_report

SCENARIOS = ["1to2", "1124", "slowdown", "fss", "ffs", "ff", "1to4", "wan-heterogeneous", "8x", "mixed"]
WORKERS = [2, 4, 3, 8, 3, 2, 2, 6, 8, 5]
MODES = ["equal", "static", "adaptive"]


def many_arms(n_arms: int, seeds: int = 3) -> tuple[PaperInfo, RunSet]:
    """``n_arms`` arms ``<mode>-<scenario>``, three per emulated cluster, with every per-arm table filled: one
    method in three modes (``params``), each arm its own campaign, as Chao's are."""
    runs, curves, alloc, artifacts, arms = [], [], [], {}, {}
    for i in range(n_arms):
        scenario, mode = SCENARIOS[i // 3], MODES[i % 3]
        arm, profile, n_workers = f"{mode}-{scenario}", f"emu-{scenario}", WORKERS[i // 3]
        arms[arm] = {"method": "alloc", "params": {"mode": mode}, "campaign": arm}
        speeds = [1.0 + (r % 3) for r in range(n_workers)]
        total = 20.0 * (1 + i // 3) * (1.0 if mode == "equal" else 0.7 if mode == "static" else 0.55)
        for seed in range(seeds):
            run_id = f"{arm}-{seed}"
            row: dict[str, Any] = {
                "run_id": run_id, "parent_run_id": f"campaign-{arm}", "method": "alloc", "campaign": arm,
                "params.method_params.mode": mode, "profile": profile, "seed": seed,
                "status": "FINISHED", "start_time": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(minutes=seed),
                "final/emulated_s": total * (1 + 0.02 * seed), "final/val_accuracy": 0.8 + 0.005 * seed,
                "time_to_target_s": total / 2, "target_reached": 1.0, "comm/bytes_total": 4e6 * n_workers,
            }  # fmt: skip
            for r, v in enumerate(speeds):
                row[f"worker/{r}/compute_s"] = total * 0.6 / v
                row[f"worker/{r}/comm_s"] = total * 0.2
                row[f"worker/{r}/idle_s"] = total * 0.1 * (v - 1)
                row[f"worker/{r}/bytes_sent"] = 1e6 * (1 + 0.1 * r)
                for epoch in range(3):
                    share = 1 / n_workers if mode == "equal" else v / sum(speeds)
                    if mode == "adaptive":
                        share = (1 - epoch / 2) / n_workers + (epoch / 2) * v / sum(speeds)
                    alloc.append({"run_id": run_id, "epoch": epoch, "rank": r, "share": share, "speed": v})
            runs.append(row)
            for k, x in enumerate(np.linspace(1, 3, 5)):
                curves.append(
                    {"run_id": run_id, "step": 10 * k, "epoch": x, "time/emulated_s": total * x / 3,
                     "val_accuracy": 0.8 * x / 3 + 0.002 * i, "val_loss": 2.0 / x + 0.01 * i}
                )  # fmt: skip
            artifacts[(run_id, "timeline.csv")] = timeline_csv(speeds if mode == "equal" else [1.0] * n_workers)
    src = {"source": {"kind": "abstract"}, "evidence": "verbatim"}
    claims = [
        {"id": "K1", "kind": "speedup", "arm": "adaptive-1to2", "baseline": "equal-1to2", "claimed": 3.0, **src},
        {"id": "K2", "kind": "relative_improvement", "arm": "adaptive-1to2", "baseline": "equal-1to2",
         "metric": "final/emulated_s", "direction": "min", "claimed": 0.2, "accept": {"abs_tolerance": 0.05}, **src},
        {"id": "K3", "kind": "ordering", "arms": ["static-1to2", "equal-1to2"], "metric": "final/emulated_s",
         "direction": "min", **src},
        {"id": "K4", "kind": "non_inferiority", "arm": "static-1to2", "baseline": "equal-1to2",
         "metric": "final/val_accuracy", "direction": "max", "margin": 0.02, **src},
        {"id": "K5", "kind": "final_metric", "arm": "adaptive-1to2", "metric": "val_accuracy", "direction": "max",
         "claimed": 0.9, "accept": {"abs_tolerance": 0.01}, "ideal": {"value": 0.95, "label": "perfect"}, **src},
    ]  # fmt: skip
    spec = validate_paper(
        {
            "kind": "reproduction",
            "citation": {"id": "many", "title": "Many arms"},
            "setup": {"baseline": "equal-1to2", "arms": arms, "min_seeds": 3},
            "claims": claims,
        }
    )
    rs = RunSet(
        "distrepro/many", "sqlite:///nowhere.db", pd.DataFrame(runs), pd.DataFrame(curves), pd.DataFrame(alloc),
        [f"campaign-{a}" for a in arms], None, artifacts,
    )  # fmt: skip
    return PaperInfo("many", spec), rs


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[Figure, Any]]:
    """Every figure saved while the test runs, by file stem, with the renderer it was drawn with
    (read right after saving, before the report closes the figure: no second draw needed)."""
    saved: dict[str, tuple[Figure, Any]] = {}
    original = Figure.savefig

    def record(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, fname, *args, **kwargs)
        saved[Path(str(fname)).stem] = (self, self.canvas.get_renderer())
        return out

    monkeypatch.setattr(Figure, "savefig", record)
    return saved


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def arm_colors(fig: Figure) -> dict[str, set[tuple[float, ...]]]:
    """Arm → the colours its ``gid="arm:<name>"`` artists are drawn in (alpha ignored)."""
    out: dict[str, set[tuple[float, ...]]] = {}
    for artist in fig.findobj(lambda a: str(a.get_gid() or "").startswith("arm:")):
        if hasattr(artist, "get_bbox_patch") and artist.get_bbox_patch() is not None:
            color = artist.get_bbox_patch().get_edgecolor()
        elif hasattr(artist, "get_color") and not hasattr(artist, "get_facecolor"):
            color = artist.get_color()
        else:
            face = artist.get_facecolor()
            color = face[0] if np.ndim(face) == 2 else face
        out.setdefault(artist.get_gid()[4:], set()).add(tuple(round(c, 3) for c in to_rgb(color)))
    return out


@pytest.mark.timeout(1800)  # a hang guard: about 21 s of CPU at 16 arms, several minutes of wall at load 15
@pytest.mark.parametrize("n_arms", [16, pytest.param(30, marks=pytest.mark.slow)])
def test_figures_stay_readable_with_many_arms(
    n_arms: int, tmp_path: Path, drawn: dict[str, tuple[Figure, Any]]
) -> None:
    info, rs = many_arms(n_arms)
    report = write_report(info, rs, tmp_path / "many", root=tmp_path)
    assert len(report.figures) == 9, sorted(report.figures)
    for path in report.figures.values():
        w, h = png_size(path)
        assert max(w, h) <= 3000 and max(w, h) / min(w, h) <= 4.0, f"{path.name}: {w}×{h} px"
    colors: dict[str, set[tuple[float, ...]]] = {}
    for name, (fig, renderer) in drawn.items():
        assert overlapping_texts(fig, renderer) == [], name
        assert legends_over_data(fig, renderer) == [], name
        assert texts_cut_off(fig, renderer) == [], name
        for arm, c in arm_colors(fig).items():
            colors.setdefault(arm, set()).update(c)
            assert len(c) == 1, f"{name}: arm {arm} in colours {c}"
    arms = set(rs.runs["campaign"])
    assert set(colors) == arms  # every arm drawn in its colour somewhere
    assert all(len(c) == 1 for c in colors.values()), {a: c for a, c in colors.items() if len(c) > 1}
    assert len({next(iter(c)) for c in colors.values()}) == n_arms  # no two arms share a colour
    per_figure = {name: set(arm_colors(fig)) for name, (fig, _) in drawn.items()}
    every_arm = ("time_per_arm", "comm_volume", "curves_emulated_time", "breakdown", "allocation", "timeline")
    every_arm += ("speedup",)  # each profile over its own reference arm
    for name in every_arm:
        assert per_figure[name] == arms, name


def test_breakdown_shows_only_the_workers_an_arm_has() -> None:
    from distrepro.report.figure_set import arm_labels, report_style
    from distrepro.report.figures import breakdown_figure

    info, rs = many_arms(6, seeds=1)  # equal/static/adaptive on 2 workers, then on 4
    labels = arm_labels(rs.runs, info.spec)
    fig = breakdown_figure(rs.runs, labels, report_style(rs.runs, labels, info.spec))
    assert fig is not None
    ticks = {ax.get_title(loc="left"): [t.get_text() for t in ax.get_xticklabels()] for ax in fig.axes}
    assert ticks["equal-1to2"] == ["0", "1"] and ticks["equal-1124"] == ["0", "1", "2", "3"]


def test_thirty_arms_get_thirty_distinct_colours() -> None:
    from distrepro.report.figures import arm_style, distinct_colors
    from distrepro.report.figures.palette import _lab

    colors = distinct_colors(30)
    lab = _lab(np.array([to_rgb(c) for c in colors]))
    gaps = np.linalg.norm(lab[:, None] - lab[None], axis=2) + np.eye(30) * 1e9
    assert gaps.min() > 15  # CIELAB ΔE: clearly different hues or lightness, never two shades of one blue
    style = arm_style([f"arm-{i}" for i in range(30)])
    assert len(set(style.colors.values())) == 30 and colors[:10] == distinct_colors(10)  # the first ten never move


def test_speedup_shows_every_profile_over_its_own_reference() -> None:
    """Every arm gets a row, in its profile's panel, over the arm set up as the baseline on that profile (Chao's
    ``equal-<scenario>``); a profile where no such arm ran lists its arms without bars; text stays >= 10 pt."""
    from matplotlib.text import Text

    from distrepro.report.figure_set import arm_labels, report_style
    from distrepro.report.figures import speedup_figure
    from distrepro.report.figures.figure_style import FONT_PT, shown_pt
    from distrepro.report.speedup_references import speedup_marks, speedup_references

    info, rs = many_arms(9, seeds=2)  # 1to2, 1124 and slowdown: equal, static, adaptive on each
    rs.runs = rs.runs[rs.runs["campaign"] != "equal-1124"].reset_index(drop=True)  # 1124 has no reference now
    labels = arm_labels(rs.runs, info.spec)
    style = report_style(rs.runs, labels, info.spec)
    refs = speedup_references(info.spec, "equal-1to2", style)
    assert refs == {"emu-1to2": "equal-1to2", "emu-slowdown": "equal-slowdown"}
    fig = speedup_figure(rs.runs, labels, style, "equal-1to2", speedup_marks(info.spec, refs, style), refs)
    assert fig is not None
    rows = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels() if t.get_visible() and t.get_text()]
    assert sorted(rows) == sorted(set(labels.values()))  # every arm, each once (panels of a row share it)
    titles = [ax.get_title(loc="left") for ax in fig.axes if ax.get_title(loc="left")]
    assert titles == [
        "emu-1to2: over equal-1to2",
        "emu-1124: no arm set up as equal-1to2 ran here, so no bars",
        "emu-slowdown: over equal-slowdown",
    ]
    budget = fig.axes[:: len(fig.axes) // 3]  # the first column (time for the budget), one panel per profile
    bars = {str(p.get_gid())[4:]: p.get_width() for ax in budget for p in ax.patches if p.get_gid()}
    assert bars["adaptive-slowdown"] == pytest.approx(1 / 0.55) and bars["static-1to2"] == pytest.approx(1 / 0.7)
    assert bars["equal-slowdown"] == pytest.approx(1.0)  # the reference itself, at 1x
    assert "static-1124" not in bars and "adaptive-1124" not in bars
    assert any("claimed K1: 3×" in t.get_text() for t in fig.findobj(Text))  # adaptive-1to2 over equal-1to2
    small = [t.get_text() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()
             and shown_pt(t.get_fontsize(), fig.get_figwidth()) < FONT_PT - 1e-9]  # fmt: skip
    assert small == []
    budget_only = rs.runs.drop(columns=["time_to_target_s"])  # one column of panels (Chao: no target)
    narrow = speedup_figure(budget_only, labels, style, "equal-1to2", {}, refs)
    assert narrow is not None and len(narrow.axes) == 3
    narrow.canvas.draw()
    assert texts_cut_off(narrow, narrow.canvas.get_renderer()) == []  # the x label fits a single narrow column


def test_the_timeline_draws_each_span_where_its_worker_and_times_put_it() -> None:
    """One collection per kind and panel (not one per worker and kind: 192 a panel at 64 workers), holding a
    rectangle per span: x from start to end in ms, worker ``ranks[i]`` on row ``i``, 0.8 high."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    from distrepro.report.figures import arm_style
    from distrepro.report.figures.figure_style import SPAN_COLORS
    from distrepro.report.figures.workers import timeline_figure

    frames = {arm: pd.read_csv(io.StringIO(timeline_csv(speeds))) for arm, speeds in
              (("two", [2.0, 1.0]), ("three", [1.0, 3.0, 1.5]))}  # fmt: skip
    frames["three"]["rank"] = frames["three"]["rank"].map({0: 4, 1: 7, 2: 9})  # ranks need not be 0..n-1
    fig = timeline_figure(frames, arm_style(list(frames)), max_steps=2)
    assert fig is not None
    for ax in fig.axes:
        arm = ax.get_title(loc="left").split(":")[0]
        tl = frames[arm][frames[arm]["step"] <= 1]  # the window: two steps, each with a communication
        rows = {r: i for i, r in enumerate(sorted(tl["rank"].unique()))}
        collections = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(collections) == len(SPAN_COLORS)
        for coll, (kind, color) in zip(collections, SPAN_COLORS.items(), strict=True):
            assert tuple(coll.get_facecolor()[0]) == to_rgba(color)
            spans = tl[tl["kind"] == kind]
            want = sorted(
                (round(1e3 * s, 9), round(1e3 * e, 9), rows[r] - 0.4, rows[r] + 0.4)
                for r, s, e in zip(spans["rank"], spans["start_s"], spans["end_s"], strict=True)
            )
            got = sorted(
                (round(p.vertices[0, 0], 9), round(p.vertices[2, 0], 9), round(p.vertices[0, 1], 9),
                 round(p.vertices[1, 1], 9))
                for p in coll.get_paths()
            )  # fmt: skip
            assert got == [(a, b, round(c, 9), round(d, 9)) for a, b, c, d in want], (arm, kind)
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"w{r}" for r in rows]
