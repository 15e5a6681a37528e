"""The tables of the analysis, computed from loaded results (read/): trust and stragglers,
scaling, batch size, accuracy, ablation, repeated cells, comparisons and the regression
gate, `analysis.analyze` that runs them all, and the tables of probe files."""
