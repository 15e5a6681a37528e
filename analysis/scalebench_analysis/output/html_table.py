"""A table of already formatted values as escaped HTML: the report's plain tables (its own
sections and the sweep's), in the page's scrolling frame."""

from __future__ import annotations

import html


def plain_table(frame) -> str:
    """A frame shown as it is (its values already formatted), escaped."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
