"""What the analysis writes: text renderings (console, CSV, JSON, Markdown) of an Analysis
and of a probe file, plots, the HTML report, the Perfetto trace (`trace`) and the live
view of a running sweep (`watch`)."""
