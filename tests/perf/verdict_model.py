"""A model of runs on a machine with a switching one-sided load, for
verdict_calibration.py --model: thousands of trials in seconds, where the real runs
(fresh processes under tests/under_load.sh) give tens in minutes.

The model, per step of a run (phases data, forward, backward of a 10 ms step, in the
proportions 2 : 4.5 : 3.5, as the real harness' numpy step):

* the run's own state: every phase of the run scaled by exp(N(0, run_sd)), drawn once a run
  (a fresh process lands on another state of the machine: caches, clocks, memory placement);
* step noise: each phase scaled by exp(N(0, step_sd)), independently;
* the switching load, one-sided: a square wave of period on_s + off_s (2 s + 2 s, as
  tests/under_load.sh), its phase drawn per trial; a step that starts while it is on is
  slowed by a factor 1 + U(load_low, load_high) (one busy process on the run's core: about
  twice the time), a step while it is off is not;
* rare interruptions, one-sided too: with probability spike_p a step gets an extra
  Exp(spike_s) on one phase.

Runs follow each other on one clock (a run's warm-up steps and its start-up time, start_s,
advance it too), so a run of 30 steps of 10 ms falls inside one half-period of the load
and a run of 1000 spans several. B adds `delay_s` to forward, as the real harness does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PHASES = ("data", "forward", "backward")
_SHARES = np.array([0.2, 0.45, 0.35])


@dataclass(frozen=True)
class LoadModel:
    step_s: float = 0.010
    run_sd: float = 0.02
    step_sd: float = 0.02
    on_s: float = 2.0
    off_s: float = 2.0
    load_low: float = 0.6
    load_high: float = 1.0
    spike_p: float = 0.02
    spike_s: float = 0.004
    start_s: float = 0.15


class Machine:
    """The clock and the load of one trial; `run` draws one run's samples."""

    def __init__(
        self, model: LoadModel, rng: np.random.Generator, loaded: bool
    ) -> None:
        self.model, self.rng, self.loaded = model, rng, loaded
        self.clock = float(rng.uniform(0.0, model.on_s + model.off_s))

    def _load_on(self, t: np.ndarray) -> np.ndarray:
        period = self.model.on_s + self.model.off_s
        return (
            np.mod(t, period) < self.model.on_s
            if self.loaded
            else np.zeros(t.shape, bool)
        )

    def run(self, iterations: int, warmup: int, delay_s: float) -> dict:
        """{"samples": {phase or "step": list of the measured steps' seconds}}, as the real
        harness' child process reports."""
        m, rng = self.model, self.rng
        steps = warmup + iterations
        state = np.exp(rng.normal(0.0, m.run_sd))
        phases = (
            m.step_s * _SHARES * state * np.exp(rng.normal(0.0, m.step_sd, (steps, 3)))
        )
        phases[:, 1] += delay_s
        spikes = rng.random(steps) < m.spike_p
        where = rng.integers(0, 3, steps)
        phases[spikes, where[spikes]] += rng.exponential(m.spike_s, int(spikes.sum()))
        self.clock += m.start_s
        # A step's load is decided by the clock at its start, which the slowed steps before
        # it advance: three passes of that fixed point settle it (a step's clock moves by
        # less than a step once the steps before it agree).
        factor = 1.0 + rng.uniform(m.load_low, m.load_high, steps)
        out = phases
        for _ in range(3):
            starts = self.clock + np.concatenate(
                ([0.0], np.cumsum(out.sum(axis=1))[:-1])
            )
            out = phases * np.where(self._load_on(starts), factor, 1.0)[:, None]
        self.clock += float(out.sum())
        measured = out[warmup:]
        samples = {p: measured[:, k].tolist() for k, p in enumerate(PHASES)}
        samples["step"] = measured.sum(axis=1).tolist()
        return {"samples": samples}
