"""The report's panels read on their own (issue 54 row 11; output/plots.py, panels.py): an
empty panel says why (the strong-scaling panel when no global batch is shared across world
sizes), phase bars are readable for every model (one axis per experiment: a 1 ms MLP is not
drawn beside a 100 ms ResNet), legends stand beside their panel, never over its data, and
labels carry no placeholder for a cell without a branch."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import pandas as pd

matplotlib.use("Agg")

import scalebench_analysis as sa  # noqa: E402
from scalebench_analysis.output import plots  # noqa: E402
from scalebench_analysis.read.cells import cells_frame  # noqa: E402
from scalebench_analysis.read.keys import GROUP_COLUMNS  # noqa: E402


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts)


def test_the_strong_scaling_panel_says_why_it_is_empty():
    """Per-rank batch 32 at world 1, 2 and 4: weak curves, but no global batch at two world
    sizes (32, 64, 128): the strong panel has the ideal line alone, and says why."""
    rows = []
    for world, efficiency in ((1, 1.0), (2, 0.9), (4, 0.8)):
        row = dict.fromkeys(GROUP_COLUMNS, "")
        row.update(experiment="resnet", mode="train", precision="fp32", setting="default")
        row.update(batch_size=32, world_size=world, global_batch=32 * world)
        row.update(weak_efficiency=efficiency, strong_efficiency=float("nan"))
        rows.append(row)
    fig = plots.scaling_efficiency(SimpleNamespace(sections={"scaling": pd.DataFrame(rows)}))
    weak, strong = fig.axes
    assert "no global batch" in _texts(strong)
    assert _texts(weak) == "" and len(weak.lines) == 2  # the ideal and the b=32 curve
    (label,) = [t.get_text() for t in weak.get_legend().get_texts() if t.get_text() != "ideal"]
    assert not label.startswith(("-", " ")) and label == "resnet train fp32 b=32"


def _phase_analysis() -> SimpleNamespace:
    """An MLP of ~1 ms steps and a ResNet of ~100 ms steps, two cells each."""
    rows = []
    for experiment, step_s in (("mlp", 0.001), ("resnet", 0.1)):
        for batch in (16, 32):
            rows.append(
                {
                    "cell_id": f"{experiment}{batch}",
                    "experiment": experiment,
                    "mode": "train",
                    "status": "ok",
                    "label": f"{experiment}/train/b{batch}/w1/fp32",
                    "phase_median_s_forward": 0.4 * step_s,
                    "phase_median_s_backward": 0.6 * step_s,
                    "phase_median_s_step": step_s,
                }
            )
    results = SimpleNamespace(
        cells=pd.DataFrame(rows), phases=lambda _: ["forward", "backward", "step"]
    )
    return SimpleNamespace(results=results)


def test_phase_bars_of_every_model_are_readable():
    fig = plots.phase_breakdown(_phase_analysis())
    panels = {ax.get_title(): ax for ax in fig.axes}
    assert set(panels) == {"mlp · train: phase breakdown", "resnet · train: phase breakdown"}
    mlp = panels["mlp · train: phase breakdown"]
    assert mlp.get_xlim()[1] < 2.0, "the MLP's 1 ms bars fill their own axis"
    widest = max(p.get_x() + p.get_width() for p in mlp.patches)
    assert widest > 0.5 * mlp.get_xlim()[1]


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legends_stand_beside_their_panels(results_file):
    analysis = sa.analyze(results_file)
    checked = 0
    for key, _title, function in plots.PLOTS + plots.REPETITION_PLOTS + plots.BATCH_PLOTS:
        fig = function(analysis)
        if fig is None:
            continue
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            checked += 1
            assert not _overlaps(legend.get_window_extent(renderer), ax.get_window_extent()), key
            assert min(t.get_fontsize() for t in legend.get_texts()) >= 8, key
        matplotlib.pyplot.close(fig)
    assert checked


def _row(branch: str) -> dict:
    spec = {
        "branch": branch,
        "experiment": "mlp",
        "mode": "train",
        "batch_size": 16,
        "world_size": 1,
        "precision": "fp32",
    }
    return {"cell_id": "0" * 16, "status": "ok", "spec": spec, **spec}


def test_a_cell_without_a_branch_has_no_placeholder_in_its_label():
    (label,) = cells_frame([_row("")]).label
    assert label == "mlp/train/b16/w1/fp32"
    (label,) = cells_frame([_row("main")]).label
    assert label == "main/mlp/train/b16/w1/fp32"


def test_the_report_names_every_plot_it_does_not_draw(results_file):
    from scalebench_analysis.output.report import NOT_DRAWN, render_html

    analysis = sa.analyze(results_file)
    page = render_html(analysis)
    drawn = {title for key, title, f in plots.PLOTS if f(analysis) is not None}
    for key, title, _ in plots.PLOTS:
        if title in drawn:
            assert f'alt="{title}"' in page
        else:
            assert f"{title} ({NOT_DRAWN[key]}" in page.replace("&#39;", "'"), title
    assert "regression_forest" in {k for k, t, _ in plots.PLOTS if t not in drawn}
