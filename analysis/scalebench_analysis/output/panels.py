"""What every panel of the report's plots shares beyond figures.py's style (issue 54 row 11):
its legend beside it, never over its data, in a size that reads at the report's DPI; and,
when it has nothing to draw, the reason written in it instead of an empty frame."""

from __future__ import annotations

#: Keyword arguments of a legend beside its panel (right of the axes, top aligned).
LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": 8}


def legend_beside(ax) -> None:
    """The panel's legend beside it (LEGEND), when it has labelled artists."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**LEGEND)


def say_empty(ax, why: str) -> None:
    """Why a panel has nothing to show, written in its middle."""
    ax.text(
        0.5,
        0.5,
        why,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize=8,
        color="0.35",
    )
