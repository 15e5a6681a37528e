"""Writes the checkpoint fixtures of checkpoint_formats_test.cc into OUT (argv[1]).

Run by the test with SCALEBENCH_PYTHON. Every file is one users have: torch.save of a
state_dict (an OrderedDict), of dict(state_dict), a Lightning-style .ckpt whose
hyper_parameters pickle classes the C++ reader must never construct, dtypes and views,
and damaged files. OUT/expected/<fixture>/<entry>.bin holds the raw little-endian bytes
of each tensor (contiguous) to check the reader bit-exactly; OUT/expected.json their
dtypes and shapes.
"""

import collections
import dataclasses
import json
import pathlib
import sys

import torch

OUT = pathlib.Path(sys.argv[1])


class Mlp(torch.nn.Module):
    """The zoo `mlp` (worker/models/mlp.cc): fc1 -> 512 -> fc2 -> 512 -> fc3."""

    def __init__(self, inputs: int, classes: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, classes)


class UserConfig:
    """A class of the user's: the reader sees __main__.UserConfig and must not need it."""

    def __init__(self):
        self.layers = [1, 2, 3]
        self.name = "unet"


@dataclasses.dataclass
class Schedule:
    warmup: int = 5
    decay: float = 0.5


expected = {}


def record(fixture: str, tensors: dict) -> None:
    folder = OUT / "expected" / fixture
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, tensor in tensors.items():
        raw = tensor.detach().contiguous().view(-1).view(torch.uint8)
        (folder / f"{name}.bin").write_bytes(raw.numpy().tobytes())
        entries[name] = {"dtype": str(tensor.dtype), "shape": list(tensor.shape)}
    expected[fixture] = entries


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(11)
    mlp = Mlp(3, 2)
    state = mlp.state_dict()
    assert isinstance(state, collections.OrderedDict) and hasattr(state, "_metadata")
    torch.save(state, OUT / "plain.pt")
    record("plain", state)

    torch.manual_seed(12)
    seq = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    seq.train()
    seq(torch.randn(8, 3))  # running stats and num_batches_tracked (int64) move
    torch.save(dict(seq.state_dict()), OUT / "dict.pt")
    record("dict", seq.state_dict())

    torch.manual_seed(13)
    lit = Mlp(3, 2)
    optimizer = torch.optim.Adam(lit.parameters(), lr=1e-3)
    lit.fc3(lit.fc2(lit.fc1(torch.randn(4, 3)))).sum().backward()
    optimizer.step()
    lit_state = collections.OrderedDict(("model." + k, v) for k, v in lit.state_dict().items())
    hyper = {
        "config": UserConfig(),
        "schedule": Schedule(),
        "ordered": collections.OrderedDict(a=1, b=[2.5, None, True]),
        "counts": collections.defaultdict(list, {"x": [1]}),
        "root": pathlib.PurePosixPath("/data/cells"),
        "tags": {"seg", "3d"},
        "frozen": frozenset({1}),
        "huge": 2**70,
        "negative": -(2**40),
        "raw": b"\x00\x01",
        "pair": (1, "a"),
        (1, 2): "a tuple key",
    }
    checkpoint = {
        "epoch": 3,
        "global_step": 42,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": lit_state,
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 3}}}},
        "callbacks": {"ModelCheckpoint{'monitor': 'val/loss'}": {"best_model_score": torch.tensor(0.25)}},
        "optimizer_states": [optimizer.state_dict()],
        "lr_schedulers": [],
        "hparams_name": "kwargs",
        "hyper_parameters": hyper,
    }
    torch.save(checkpoint, OUT / "lightning.ckpt")
    record("lightning", lit.state_dict())

    mixed = collections.OrderedDict(lit_state)
    mixed["ema.fc1.weight"] = lit.fc1.weight.detach().clone()
    torch.save({"state_dict": mixed, "epoch": 1}, OUT / "lightning_mixed.ckpt")

    torch.manual_seed(14)
    base = torch.randn(4, 5)
    tensors = {
        "half": torch.randn(3, 2).half(),
        "bfloat16": torch.randn(2, 3).bfloat16(),
        "transposed": base.t(),
        "sliced": base[1:, 2:],
        "double": torch.randn(2, dtype=torch.float64),
        "int8": torch.tensor([-3, 7], dtype=torch.int8),
        "int32": torch.tensor([[1, -2]], dtype=torch.int32),
        "uint8": torch.tensor([250, 3], dtype=torch.uint8),
        "int16": torch.tensor([-300], dtype=torch.int16),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "weight": torch.nn.Parameter(torch.randn(2, 2)),
    }
    assert not tensors["transposed"].is_contiguous()
    torch.save(tensors, OUT / "dtypes.pt")
    record("dtypes", tensors)

    (OUT / "not_zip.pt").write_text("name,weight\nfc1,0.5\n")
    data = (OUT / "plain.pt").read_bytes()
    (OUT / "truncated.pt").write_bytes(data[: len(data) // 2])
    torch.save({"epoch": 3, "lr": 0.1, "note": "no weights here"}, OUT / "no_tensors.pt")
    torch.save(dict(seq.state_dict()), OUT / "legacy.pt", _use_new_zipfile_serialization=False)

    (OUT / "expected.json").write_text(json.dumps(expected, indent=1))


if __name__ == "__main__":
    main()
