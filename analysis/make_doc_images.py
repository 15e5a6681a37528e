"""Regenerates the plot pictures of docs/analysis-guide.md from the synthetic test file.

.venv/bin/python analysis/make_doc_images.py [docs/img]
"""

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "analysis"))

import scalebench_analysis as sa  # noqa: E402
from scalebench_analysis.output import figures, plots  # noqa: E402

import make_results  # noqa: E402
import results_edits  # noqa: E402


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results = make_results.write_results(Path(tmp) / "results.h5")
        loaded = sa.load(results)
        victim = loaded.cells[loaded.cells.label == "main/mlp-train/train/b32/w2/fp32"].cell_id
        base = results_edits.copy_with_slowdown(results, Path(tmp) / "base.h5", victim.iloc[0], 0.9)
        analysis = sa.analyze(loaded, sa.AnalysisOptions(baseline_file=base))
        for key, _, function in plots.PLOTS:
            fig = function(analysis)
            data = figures.figure_png(fig)
            (out / f"analysis-{key}.png").write_bytes(data)
            print(f"{out / f'analysis-{key}.png'}: {len(data) // 1024} KiB")


if __name__ == "__main__":
    main()
