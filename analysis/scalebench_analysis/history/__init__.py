"""`scalebench history`: the same cells lined up across many results files (model, lines,
statistics), rendered as text, Markdown, JSON and HTML (render), plotted (plots), and the
command (command)."""
