"""A plain Keras 3 training script (any backend; the demo uses JAX, so no TensorFlow is
needed): a small classifier fitted on synthetic data, then a prediction pass.

Nothing in it knows about scalebench. Run by scalebench through
``python -m scalebench_client train.py ...`` (docs/programs.md#keras), every ``fit`` and
``predict`` reports its batches. Run alone: ``KERAS_BACKEND=jax python train.py``.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="batches to fit")
    parser.add_argument("--width", type=int, default=256)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    samples = args.batch_size * args.steps
    x = rng.standard_normal((samples, 64)).astype("float32")
    y = rng.integers(0, 10, samples)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(args.width, activation="relu"),
            keras.layers.Dense(args.width, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0)
    model.predict(x[: args.batch_size * 4], batch_size=args.batch_size, verbose=0)


if __name__ == "__main__":
    main()
