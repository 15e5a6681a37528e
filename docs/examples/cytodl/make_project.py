"""A CytoDL project as a CytoDL user has one, made from the installed package (run it with
CytoDL's environment's python; setup_env.sh made it).

    make_project.py <project folder>

* **The clone**: the package's two top-level folders of the cyto-dl 0.6.2 wheel, `cyto_dl/`
  (with `train.py`, `eval.py`) and the Hydra tree `configs/` (train.py finds it as
  `../configs`), in a git repository with two branches whose code differs:
  `main` (the package as released) and `slow-forward`, whose
  `MultiTaskIm2Im._train_forward` sleeps SLOW_FORWARD_S before the backbone: a change
  of the training forward alone, which the per-phase figures must place in `forward` and
  which leaves every output unchanged (the accuracy check passes).
* **The data**, committed with the code (as a small project's test data is): tiny synthetic
  6-channel OME-TIFF images in `data/` (CZYX, 16 x 32 x 32; CytoDL's im2im/segmentation reads
  the raw image's channel 5 and the segmentation's channel 0, and zooms by 0.25 to
  4 x 8 x 8) and the CSVs of their paths (`train.csv`, `valid.csv`, `test.csv`; columns
  raw, seg; relative to the tree, where the program runs) that `data.path=data` names.
* **A checkpoint** for the inference rows, `checkpoints/segmentation.ckpt`, written by CytoDL's
  own train.py on main (a few steps), committed before the branches part.

The images are a deterministic function of their index: the project is the same on every
machine, so the figures of two runs compare.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cyto_dl
import numpy as np
from bioio.writers import OmeTiffWriter

SLOW_FORWARD_S = 0.05
SHAPE_CZYX = (6, 16, 32, 32)
SPLITS = {"train": 4, "valid": 2, "test": 2}
SLOW_BRANCH = "slow-forward"


def write_images(project: Path) -> None:
    """Each image: noise with bright blobs on channel 5, their mask on the segmentation."""
    data = project / "data"
    data.mkdir(parents=True, exist_ok=True)
    z, y, x = np.meshgrid(*(np.arange(n) for n in SHAPE_CZYX[1:]), indexing="ij")
    index = 0
    for split, count in SPLITS.items():
        rows = ["raw,seg"]
        for _ in range(count):
            rng = np.random.default_rng(index)
            mask = np.zeros(SHAPE_CZYX[1:], dtype=bool)
            for _blob in range(4):
                centre = rng.uniform((2, 4, 4), (14, 28, 28))
                radius = rng.uniform(2, 5)
                mask |= (z - centre[0]) ** 2 + (y - centre[1]) ** 2 + (
                    x - centre[2]
                ) ** 2 < radius**2
            raw = rng.normal(100, 10, SHAPE_CZYX).clip(0)
            raw[5][mask] += 200
            raw = raw.astype(np.uint16)
            seg = np.zeros(SHAPE_CZYX, dtype=np.uint8)
            seg[0][mask] = 1
            raw_path, seg_path = (
                data / f"raw_{index}.ome.tiff",
                data / f"seg_{index}.ome.tiff",
            )
            OmeTiffWriter.save(raw, str(raw_path), dim_order="CZYX")
            OmeTiffWriter.save(seg, str(seg_path), dim_order="CZYX")
            rows.append(
                f"{raw_path.relative_to(project)},{seg_path.relative_to(project)}"
            )
            index += 1
        (data / f"{split}.csv").write_text("\n".join(rows) + "\n")


def git(project: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=CytoDL example",
            "-c",
            "user.email=example@scalebench.invalid",
            *args,
        ],
        cwd=project,
        check=True,
        stdout=subprocess.DEVNULL,
    )


# The overrides that fit CytoDL's im2im/segmentation to the tiny data (the task files pass the
# same): the data's folder, no cache, patches of the zoomed image's size.
DATA_OVERRIDES = [
    "data.path=data",
    "data.cache_dir=null",
    "data._aux.patch_shape=[4,8,8]",
]


def make_checkpoint(project: Path) -> None:
    """CytoDL's train.py on main, two steps: its last checkpoint is the inference rows'."""
    out = project / "logs" / "checkpoint-run"
    command = [
        sys.executable,
        "cyto_dl/train.py",
        "experiment=im2im/segmentation",
        "trainer=cpu",
        "trainer.max_epochs=-1",
        "++trainer.max_steps=2",
        "data.batch_size=2",
        *DATA_OVERRIDES,
        "~callbacks.early_stopping",
        "test=false",
        f"hydra.run.dir={out}",
    ]
    env = {**os.environ, "PYTHONPATH": ".", "PROJECT_ROOT": "."}
    done = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, check=False
    )
    last = out / "checkpoints" / "last.ckpt"
    if done.returncode != 0 or not last.exists():
        raise SystemExit(
            f"CytoDL's train.py did not write {last}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    (project / "checkpoints").mkdir(exist_ok=True)
    shutil.copy(last, project / "checkpoints" / "segmentation.ckpt")


def make_clone(project: Path) -> None:
    """The released package, data and checkpoint on main; the slow forward on its own branch."""
    site = Path(cyto_dl.__file__).resolve().parent.parent
    if project.exists():
        shutil.rmtree(project)
    project.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(site / "cyto_dl", project / "cyto_dl", ignore=ignore)
    shutil.copytree(site / "configs", project / "configs", ignore=ignore)
    (project / ".gitignore").write_text("__pycache__/\n*.pyc\n*.log\nlogs/\n")
    write_images(project)
    make_checkpoint(project)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(
        project,
        "commit",
        "-q",
        "-m",
        "cyto-dl 0.6.2 as released, tiny data, a checkpoint",
    )

    git(project, "checkout", "-q", "-b", SLOW_BRANCH)
    model = project / "cyto_dl" / "models" / "im2im" / "multi_task.py"
    text = model.read_text()
    anchor = "        z = self.backbone(batch[self.hparams.x_key])\n"
    if text.count(anchor) != 1:
        raise SystemExit(
            f"{model}: _train_forward is not as in cyto-dl 0.6.2 (no unique {anchor!r})"
        )
    text = text.replace(
        anchor,
        f"        import time\n\n        time.sleep({SLOW_FORWARD_S})  # the branch's change\n"
        + anchor,
    )
    model.write_text(text)
    git(
        project,
        "commit",
        "-q",
        "-am",
        f"MultiTaskIm2Im._train_forward: {SLOW_FORWARD_S * 1000:g} ms slower",
    )
    git(project, "checkout", "-q", "main")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} <project folder>")
    make_clone(Path(sys.argv[1]).resolve())


if __name__ == "__main__":
    main()
