"""A report's throughput figure when every cell of one experiment failed: that panel has no
throughput (NaN), and the figure must still be drawn (it used to raise 'Axis limits cannot be
NaN or Inf' and end the whole report)."""

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")

from scalebench_analysis.output import plots  # noqa: E402


def _points():
    rows = []
    for experiment, status, throughput in (("ok", "ok", 100.0), ("broken", "failed", np.nan)):
        for batch in (8, 16):
            rows.append(
                {
                    "experiment": experiment,
                    "mode": "train",
                    "world_size": 1,
                    "branch": "main",
                    "precision": "fp32",
                    "setting": "",
                    "batch_size": batch,
                    "status": status,
                    "trusted": status == "ok",
                    "throughput_samples_per_s": throughput * batch,
                }
            )
    return pd.DataFrame(rows)


def test_a_panel_of_failed_cells_keeps_the_figure():
    fig = plots.throughput_vs_batch(SimpleNamespace(batch_points=_points()))
    assert fig is not None
    titles = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    broken = next(ax for title, ax in titles.items() if title.startswith("broken"))
    assert any(text.get_text() == "no cell ran ok" for text in broken.texts)
    ok = next(ax for title, ax in titles.items() if title.startswith("ok"))
    assert ok.get_ylim()[1] == 1.1 * 1600.0
