"""Stragglers by node (issue 41 item 7): the straggler rule applied per host of a cell whose
ranks ran on two or more hosts (tables/straggler_nodes.py), recomputed from the raw timings,
and shown by every output of `analyze` and by the report."""

import csv
import io
import json

import h5py
import numpy as np
import pandas as pd
import pytest

import scalebench_analysis as sa
from scalebench_analysis.tables.straggler_nodes import rank_ranges, straggler_node_table

import make_results
import rawdata
from conftest import run_cli

#: Six ranks placed cyclically on two nodes, as `scalebench submit` does (srun
#: --distribution=cyclic): nodea has ranks 0, 2, 4 and nodeb 1, 3, 5.
CYCLIC = ["nodea", "nodeb"] * 3


@pytest.fixture(scope="module")
def slow_node_file(tmp_path_factory):
    """A synthetic file of three training cells: one of 2 ranks on one host (the synthetic
    file's straggler cell; the others are left out to keep the report quick), a 6-rank cell
    whose nodeb ranks all compute 30 % slower, and one of three hosts whose nodeb has one
    slow rank of two; (path, slow node cell, slow rank cell)."""
    path = make_results.write_results(tmp_path_factory.mktemp("nodes") / "nodes.h5")
    with h5py.File(path, "r+") as f:
        cells = f["cells"]
        keep = make_results.make_spec("main", "train", 16, 2)["cell_id"]
        for cell_id in [c for c in cells if c != keep]:
            del cells[cell_id]
    slow_node = make_results.add_multinode_cell(path, CYCLIC, slow_ranks=(1, 3, 5))
    slow_rank = make_results.add_multinode_cell(
        path, CYCLIC[:4] + ["nodec"] * 2, slow_ranks=(3,), batch=32, seed=7
    )
    return str(path), slow_node, slow_rank


def _expected(path: str, cell: rawdata.RawCell, threshold: float = 0.10) -> dict:
    """Per host, from h5py alone: (ranks, low median of its ranks' median busy times,
    slowdown over the fastest host, excess over the other hosts' median, straggler)."""
    busy = cell.phase("step") - cell.phase("comm_wait")
    medians = np.nanmedian(busy, axis=1)
    with h5py.File(path, "r") as f:
        hosts = list(f["cells"][cell.cell_id]["rank_hosts"].asstr()[()])
    names = list(dict.fromkeys(hosts))
    per_host = {}
    for host in names:
        mine = sorted(m for m, x in zip(medians, hosts) if x == host)
        per_host[host] = float(mine[(len(mine) - 1) // 2])
    fastest = min(per_host.values())
    out = {}
    for host, median in per_host.items():
        others = float(np.median([v for h, v in per_host.items() if h != host]))
        ranks = [r for r, x in enumerate(hosts) if x == host]
        excess = median / others - 1
        out[host] = (ranks, median, median / fastest - 1, excess, excess > threshold)
    return out


def test_slow_node_flagged(slow_node_file):
    path, slow_node, slow_rank = slow_node_file
    table = sa.analyze(path).sections["straggler_nodes"]
    raw = rawdata.read(path)
    assert set(table.cell_id) == {slow_node, slow_rank}  # the single-host cells have no rows
    for cell_id in (slow_node, slow_rank):
        rows = table[table.cell_id == cell_id]
        expected = _expected(path, raw.cells[cell_id])
        assert list(rows.host) == list(expected)  # the node of rank 0 first
        for row in rows.itertuples():
            ranks, median, slowdown, excess, straggler = expected[row.host]
            assert row.ranks == rank_ranges(ranks)
            assert row.median_busy_s == pytest.approx(median, rel=1e-12)
            assert row.slowdown == pytest.approx(slowdown, rel=1e-9, abs=1e-12)
            assert row.excess == pytest.approx(excess, rel=1e-9)
            assert row.straggler == straggler
    rows = table[table.cell_id == slow_node].set_index("host")
    assert rows.ranks.to_dict() == {"nodea": "0,2,4", "nodeb": "1,3,5"}
    assert list(rows.straggler) == [False, True]
    assert 0.2 < rows.slowdown["nodeb"] < 0.4 and rows.slowdown["nodea"] == 0
    assert rows.straggler_ranks.to_dict() == {"nodea": 0, "nodeb": 3}


def test_one_slow_rank_is_not_a_slow_node(slow_node_file):
    """nodeb's rank 3 is slow, its rank 1 is not: the node's low median is its healthy
    rank's figure, so the rank is a straggler rank and the node is not a straggler node."""
    path, _, slow_rank = slow_node_file
    analysis = sa.analyze(path)
    ranks = analysis.sections["stragglers"]
    flagged = ranks[(ranks.cell_id == slow_rank) & ranks.straggler]
    assert list(flagged["rank"]) == [3] and list(flagged.host) == ["nodeb"]
    nodes = analysis.sections["straggler_nodes"]
    rows = nodes[nodes.cell_id == slow_rank].set_index("host")
    assert rows.ranks.to_dict() == {"nodea": "0,2", "nodeb": "1,3", "nodec": "4-5"}
    assert not rows.straggler.any()
    assert rows.straggler_ranks.to_dict() == {"nodea": 0, "nodeb": 1, "nodec": 0}


def test_single_host_runs_have_no_section(results_file, synthetic):
    """Every cell of the synthetic file ran on one host: no section, no change to the
    outputs of a one-node run."""
    if not synthetic:
        pytest.skip("the synthetic file's cells each ran on one host")
    assert "straggler_nodes" not in sa.analyze(results_file).sections


def _ranks_frame(cells: dict) -> pd.DataFrame:
    """quality.straggler_table's columns for cells {id: [(host, median busy s, straggler)]}."""
    rows = [
        {"cell_id": c, "label": c, "rank": r, "host": h, "median_busy_s": m, "straggler": s}
        for c, ranks in cells.items()
        for r, (h, m, s) in enumerate(ranks)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "ranks, expected",
    [
        # two hosts, the second slow: flagged against the other's median
        ([("a", 1.0, False), ("b", 1.3, True)], {"a": (0.0, False), "b": (0.3, True)}),
        # within the threshold
        ([("a", 1.0, False), ("b", 1.05, False)], {"a": (0.0, False), "b": (0.05, False)}),
        # three hosts, two slow: each slow one is 13 % over the others' median (1.15)
        (
            [("a", 1.0, False), ("b", 1.3, False), ("c", 1.3, False)],
            {"a": (0.0, False), "b": (0.3, True), "c": (0.3, True)},
        ),
        # a host's figure is its ranks' low median: 2 of 3 slow ranks make a slow node...
        (
            [("a", 1.0, False), ("a", 1.0, False), ("a", 1.0, False)]
            + [("b", 1.0, False), ("b", 1.5, True), ("b", 1.5, True)],
            {"a": (0.0, False), "b": (0.5, True)},
        ),
        # ... 1 of 2 does not (their mean would be 25 % over)
        (
            [("a", 1.0, False), ("a", 1.0, False), ("b", 1.0, False), ("b", 1.5, True)],
            {"a": (0.0, False), "b": (0.0, False)},
        ),
        # ... nor 2 of 4
        (
            [("a", 1.0, False)] * 4 + [("b", 1.0, False)] * 2 + [("b", 1.5, True)] * 2,
            {"a": (0.0, False), "b": (0.0, False)},
        ),
        # a rank without timings (NaN) leaves its host's median to the others
        ([("a", 1.0, False), ("a", np.nan, False), ("b", 2.0, True)], {"a": (0, 0), "b": (1, 1)}),
    ],
)
def test_table_rule(ranks, expected):
    table = straggler_node_table(_ranks_frame({"c": ranks}), threshold=0.10)
    got = {r.host: (r.slowdown, r.straggler) for r in table.itertuples()}
    assert list(got) == list(expected)
    for host, (slowdown, straggler) in expected.items():
        assert got[host][0] == pytest.approx(slowdown)
        assert got[host][1] == bool(straggler)


@pytest.mark.parametrize(
    "ranks",
    [
        [("a", 1.0, False), ("a", 2.0, True)],  # one host
        [("a", 1.0, False), ("", 2.0, True)],  # a rank of unknown host
    ],
)
def test_no_rows_without_two_known_hosts(ranks):
    assert straggler_node_table(_ranks_frame({"c": ranks}), threshold=0.10).empty


@pytest.mark.parametrize(
    "ranks, text",
    [([0], "0"), ([0, 1, 2, 3], "0-3"), ([8, 0, 2, 1, 3], "0-3,8"), ([1, 3, 5], "1,3,5")],
)
def test_rank_ranges(ranks, text):
    assert rank_ranges(ranks) == text


def test_every_output(slow_node_file, tmp_path):
    """Console (--details), CSV, JSON, Markdown, the summary and the HTML report."""
    path, slow_node, _ = slow_node_file
    out = run_cli("analyze", path, "--details", check_rc=0).stdout
    section = out.split("== Straggler nodes")[1].split("\n\n")[0]
    lines = [line.split() for line in section.splitlines()]
    assert [w[1:3] for w in lines if "nodeb" in w and "1,3,5" in w]  # the flagged node
    assert not any("nodea" in w for w in lines)  # shown: the straggler nodes alone
    assert "straggler nodes: nodeb (1 of 2 multi-node cells" in out.split("== Summary ==")[1]
    brief = run_cli("analyze", path, check_rc=0).stdout
    assert "straggler_nodes" in brief.split("Other tables:")[1]

    text = run_cli("analyze", path, "--format", "csv", "--table", "straggler_nodes").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    mine = {(r["host"], r["ranks"], r["straggler"]) for r in rows if r["cell_id"] == slow_node}
    assert mine == {("nodea", "0,2,4", "False"), ("nodeb", "1,3,5", "True")}
    document = json.loads(run_cli("analyze", path, "--format", "json", check_rc=0).stdout)
    assert len(document["sections"]["straggler_nodes"]) == 5  # 2 hosts + 3 hosts

    markdown = run_cli("analyze", path, "--format", "markdown", check_rc=0).stdout
    assert "## Straggler nodes" in markdown and "| 1,3,5 |" in markdown

    report = tmp_path / "report.html"
    run_cli("report", path, "-o", str(report), check_rc=0)
    html = report.read_text()
    assert '<h2 id="straggler_nodes">Straggler nodes' in html and "<td>1,3,5</td>" in html
    assert "</b>straggler nodes</div>" in html
