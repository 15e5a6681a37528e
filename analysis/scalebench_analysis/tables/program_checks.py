"""What a program cell's worker found wrong with a run that ended well (layout 1.9), and the
warning that two branches ran the same code (docs/programs.md#code-identity).

* `untrusted_reasons`: the cell attribute of that name, one sentence each with what to
  change: the program ran other steps than warm-up + iterations asked (Note [Program steps
  asked and run]), or a package of the branch's tree was imported from outside the tree
  (Note [Program code identity]). quality.py counts such a cell untrusted.
* `identical_code_warnings`: cells of one experiment and mode whose branches ran
  byte-identical tree sources (the same `effective_program_code_digest`, the sha256 the
  client took of every imported source file of the tree): whatever differs between those
  branches' figures is noise, not their code.
"""

from __future__ import annotations

import json

import pandas as pd

#: The cell attribute holding the digest of the tree's imported sources (the client's `code`
#: record), "sha256:<hex>"; other values say why there is none ("not checked: ...").
DIGEST_COLUMN = "effective_program_code_digest"


def untrusted_reasons(cell: pd.Series) -> list[str]:
    """The cell's stored `untrusted_reasons` (a JSON list of sentences); [] without them."""
    value = cell.get("untrusted_reasons")
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if not isinstance(value, str) or not value:
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return [value]
    return [str(v) for v in parsed] if isinstance(parsed, list) else [str(parsed)]


def identical_code_warnings(cells: pd.DataFrame) -> list[str]:
    """One line per experiment and mode where two branches ran byte-identical code: every
    ok cell of each branch has the same code digest, and it is the other branch's. Empty
    when no cell has a digest (not program cells, or no client)."""
    if DIGEST_COLUMN not in cells or "branch" not in cells:
        return []
    ok = cells[(cells.status == "ok") & cells[DIGEST_COLUMN].astype(str).str.startswith("sha256:")]
    lines = []
    for (experiment, mode), group in ok.groupby(["experiment", "mode"], sort=True):
        digests = {
            branch: set(rows[DIGEST_COLUMN].astype(str))
            for branch, rows in group.groupby("branch", sort=True)
        }
        branches = sorted(b for b, d in digests.items() if len(d) == 1)
        for i, first in enumerate(branches):
            for second in branches[i + 1 :]:
                if digests[first] == digests[second]:
                    digest = next(iter(digests[first]))
                    lines.append(
                        f"{experiment} ({mode}): the code that ran is the same on both branches "
                        f"{first} and {second} ({digest[:19]}...: every imported source file "
                        "of the tree byte for byte): their difference is noise. If the "
                        "branches differ, the program did not import the tree's code (see "
                        "the cells' untrusted reasons and docs/programs.md#code-identity)"
                    )
    return lines
