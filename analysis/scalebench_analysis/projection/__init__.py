"""`scalebench project`: the step at worker counts and nodes beyond those measured,
predicted from a results file (and probe files), and checked against the file's own
larger worlds (docs/projection.md).

Modules: inputs (what is read from the file), compute (the compute side at a batch and
world), stragglers (the slowest of N ranks), schedule (the DDP bucket schedule), comm (the
allreduce cost and its fits), links (a curve's communication model), model (the projected
rows), check (predicted against measured), project (all of it), render, command.

Note [Projection model]
~~~~~~~~~~~~~~~~~~~~~~~
A curve is the cells of one configuration (every spec field but batch size, world size and
inference dataset size). Its inputs are its ok cells up to the fit world; the projection of
a training step of N workers at per-rank batch b is

    step(N, b) = Q_N(compute) + exposed(N, b)

* compute: per rank and measured iteration, the step minus comm_wait (data, h2d, forward,
  backward, optimizer and what lies between them), from the reference cell: the cell of the
  largest fit world not above N (so a world of 2 or more carries the slowdown of compute
  under communication that the cell itself measured), of the batch nearest b. To another
  batch each phase is scaled by its batch law: a least-squares line a + s * b through the
  phase's medians over the batches measured at that world (through the origin with one
  batch; the optimizer's time does not depend on the batch).
* Q_N: the ranks synchronise at the gradient allreduce, so the step is set by the slowest
  of N ranks. Its median is the quantile 0.5 ** (1 / N) of the pooled per-rank,
  per-iteration compute samples (the maximum of N independent draws from the measured
  distribution; p95: 0.95 ** (1 / N)). It never exceeds the slowest sample measured; the
  rows say when the quantile lies beyond what the samples resolve (`beyond_samples`).
  The part above the median compute is the `straggler` part of the step. The p95's 90 %
  interval (`step_p95_low_s`, `step_p95_high_s`) is predictive: it should hold the p95 of
  a run of as many iterations as the reference cell measured (stragglers.p95_interval:
  lognormal compute, its mean and sd resampled), plus the exposed communication.
* exposed(N, b): the gradient allreduce that backward does not hide. The gradient's bytes
  (the cell's DDP buckets, else parameter_count x 4 B) are cut into buckets by the caps
  (first bucket, then bucket_bytes); bucket k is ready when the gradient-ready curve
  reaches its last byte (the fraction of backward at which the cell's own buckets were
  launched, `bucket_times`; uniform over backward without them), launched in order, and
  its allreduce runs on one communication stream after the previous one. exposed = end of
  the last allreduce - end of backward, at least 0, plus the overhead below.
* allreduce(bytes, n) = 2(n-1) * latency + 2(n-1)/n * bytes / busbw (ring). From a probe
  file of P workers: time = a + c * bytes fitted to its in-place allreduce rows (least
  squares on the relative error), latency = a / 2(P-1), busbw = 2(P-1)/P / c; the level
  is inter-node when its workers ran on several hosts. N workers span ceil(N / G) nodes
  for --gpus-per-node G (default: one node) and then use the inter-node fit; where a level
  was not measured, the other stands for it and `missing` says what to run. With a probe,
  the measured exposed comm_wait of the fit cells beyond the model (division and copies of
  the gradients, docs/ddp.md) is added as a constant overhead at every N > 1. Without a
  probe, the link is fitted so that the modelled exposed communication of the fit cells
  of 2 workers or more matches their measured one (the least comm_wait of any rank per
  iteration, its median over iterations): busbw alone with one world size measured,
  latency and busbw with two or more; fully hidden communication gives a lower bound.
* the best bucket: the cap among 0.25 - 256 MiB (and the cell's own) that minimises the
  step (ties within 0.1 % to the largest cap).
* efficiencies: weak = (throughput(N) / N) / (measured throughput / world) of the
  curve's smallest fit world at batch b; strong: that cell's global batch split over N
  (per-rank batch G / N, scaled by the batch laws), against the same ideal line.
* inference: shards run alone; a shard's k batches take k * mean + sqrt(k) * sd * z_N
  (z_N the median of the largest of N standard normals), the slowest sets the throughput;
  latency is the reference's batch time distribution. k is the reference's fixed dataset
  over N shards, or its batches per rank.

What the model does not see: contention the probe or the small worlds do not show
(shared links, switches, a parameter server-like hot spot), the switch of MPI/NCCL to
other algorithms (tree, recursive doubling) at large N, buckets cut at parameter edges
(the model's buckets are the caps), and a data loader that does not scale. Where the fit
cells themselves show contention, the forward phase (no allreduce in flight) slowing by
more than model.CONTENTION between the smallest and largest fit world, `missing` says so
(model.contention_notes): the projection keeps the largest fit world's compute, and on a
machine whose cores the ranks share it then understates the step (docs/projection.md,
a real run on two cores).
"""
