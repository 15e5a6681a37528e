"""The DDP bucket schedule of one backward pass, as pure functions: the buckets a gradient
size makes, when each becomes ready, and the communication backward does not hide.
See Note [Projection model] in projection/__init__.py.

Times are seconds from the start of backward; sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: The gradient-ready curve when the cell recorded no buckets: gradients become ready at an
#: even rate over backward (fraction of backward done, fraction of the gradient bytes).
UNIFORM_CURVE = (np.array([0.0, 1.0]), np.array([0.0, 1.0]))


def bucket_sizes(total_bytes: float, first_bucket_bytes: float, bucket_bytes: float) -> np.ndarray:
    """Bytes of each bucket in launch order: the first capped at `first_bucket_bytes`, every
    other at `bucket_bytes`, the last holding the rest (docs/ddp.md#buckets). Parameters are
    not known here, so a bucket is never cut short at a parameter's edge: the model's buckets
    are the caps themselves (Note [Projection model]). Empty for no gradient."""
    if total_bytes <= 0:
        return np.zeros(0)
    if first_bucket_bytes <= 0 or bucket_bytes <= 0:
        raise ValueError("bucket caps must be positive")
    first = min(first_bucket_bytes, total_bytes)
    rest = total_bytes - first
    full, tail = divmod(rest, bucket_bytes)
    sizes = [first] + [bucket_bytes] * int(full) + ([tail] if tail > 0 else [])
    return np.asarray(sizes, dtype=float)


def ready_fractions(sizes: np.ndarray, curve: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The fraction of backward at which each bucket's last byte is ready. `curve` is
    (fraction of backward, fraction of gradient bytes ready), both rising from 0 to 1: the
    cell's own buckets' launch times (inputs.ready_curve) or UNIFORM_CURVE."""
    fractions, ready = curve
    if sizes.size == 0:
        return np.zeros(0)
    ends = np.cumsum(sizes) / sizes.sum()
    return np.interp(ends, ready, fractions)


def exposed_s(
    backward_s: float,
    sizes: np.ndarray,
    ready: np.ndarray,
    allreduce_s: Callable[[np.ndarray], np.ndarray],
) -> float:
    """End of the last allreduce minus end of backward, at least 0: bucket k is launched at
    `ready[k] * backward_s` (in index order) and runs on one communication stream after
    bucket k-1 has finished, for `allreduce_s(sizes)[k]` seconds."""
    if sizes.size == 0:
        return 0.0
    durations = np.asarray(allreduce_s(sizes), dtype=float)
    launched = np.maximum.accumulate(ready * backward_s)
    done_before = np.concatenate(([0.0], np.cumsum(durations)[:-1]))
    # end_k = sum(d_0..d_k) + max over j <= k of (launched_j - sum(d_0..d_{j-1})).
    ends = np.cumsum(durations) + np.maximum.accumulate(launched - done_before)
    return float(max(0.0, ends[-1] - backward_s))
