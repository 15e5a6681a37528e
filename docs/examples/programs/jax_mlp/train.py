"""A plain JAX training loop (an MLP fitted by SGD on synthetic data) marked for scalebench
with the JAX adapter (docs/programs.md#jax): compilation is timed apart from the steps, and
each step ends when its results exist.

Run alone: ``python train.py --steps 20`` (the adapter's calls are then no-ops).
"""

from __future__ import annotations

import argparse
import itertools
import time

import jax
import jax.numpy as jnp
import scalebench_client as sb
import scalebench_client.jax as sbj


def init(key, sizes):
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        key, sub = jax.random.split(key)
        params.append(
            (
                jax.random.normal(sub, (fan_in, fan_out)) / jnp.sqrt(fan_in),
                jnp.zeros(fan_out),
            )
        )
    return params


def loss_fn(params, x, y):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return -jnp.mean(
        jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1)
    )


def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()

    sbj.initialize()
    key = jax.random.PRNGKey(0)
    params = init(key, [64, args.width, args.width, 10])
    data_key = jax.random.PRNGKey(1)
    x = jax.random.normal(data_key, (args.batch_size, 64))
    y = jax.random.randint(data_key, (args.batch_size,), 0, 10)
    step = sbj.compile(train_step, params, x, y)  # reported as compile_s

    began = time.monotonic()
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            began = time.monotonic()  # the script's own clock around the measured steps
        with sb.step():
            with sb.phase("data"):
                batch_x, batch_y = x + 0.0, y
            with sb.phase("compute"):
                params, loss = sbj.block(step(params, batch_x, batch_y))
    sb.metric("outside_measured_s", time.monotonic() - began)
    sb.metric("loss", float(loss))
    sbj.memory()


if __name__ == "__main__":
    main()
