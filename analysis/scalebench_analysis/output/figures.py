"""The look shared by every figure of the analysis (the report's plots, the batch study's,
and history's): the Agg backend (no display), the style, one grid of panels, PNG bytes."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 80
STYLE = {
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    "legend.fontsize": 7,
}


def figure_png(fig) -> bytes:
    """PNG bytes of `fig` (closed afterwards)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    plt.close(fig)
    return buffer.getvalue()


def panel_grid(n: int, width: float = 4.2, height: float = 3.2):
    """(figure, its first `n` axes): up to three panels a row, each `width` x `height`
    inches, in the shared style."""
    columns = min(n, 3)
    rows = -(-n // columns)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            rows,
            columns,
            figsize=(width * columns, height * rows),
            squeeze=False,
            layout="constrained",
        )
    for ax in axes.ravel()[n:]:
        fig.delaxes(ax)
    return fig, axes.ravel()[:n]
