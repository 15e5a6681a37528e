// The end of the job when a node cannot be reached: a guard that ends mpirun if it outlives
// the abort (issue 55).
#pragma once

namespace scalebench {

// Note [Launcher guard]
// ~~~~~~~~~~~~~~~~~~~~~
// When rank 0 declares the job over (a hung cell past --hang-limit, a fatal error) it calls
// MPI_Abort, and Open MPI 4.1's mpirun kills every rank it can reach and then waits for each
// node's daemon (orted) to confirm. A node cut off from the network never answers: its
// daemon's TCP connection holds the kill order unacknowledged, so mpirun waits until TCP gives
// up on it, about 15 minutes with Linux's defaults (net.ipv4.tcp_retries2 = 15; measured
// with 5 in mpirun's network namespace: mpirun ended with exit status 4, 15 s after the
// abort). Open MPI's keepalives (oob_tcp_keepalive_*) do not shorten it: a connection with
// data in flight is never probed. A signal to such an mpirun made it crash (SIGTERM, SIGINT,
// SIGHUP: a segmentation fault within a second, exit 139, Open MPI 4.1.4), never end cleanly.
//
// So before it ends itself, a rank whose parent is Open MPI's launcher (mpirun, mpiexec,
// orterun, prterun: the usual case for rank 0, with mpirun in a batch script on the first
// node) forks a guard: a process of its own session (mpirun ends a rank by its process group,
// so the guard outlives it) that holds no descriptor of the rank (no pipe that mpirun's output
// forwarding would wait for, no results-file lock) except a pidfd of the launcher. It waits
// kLauncherEndGraceS for the launcher to end, which it does within about a second when every
// node answers; if it has not, the guard writes one line on the launcher's own stderr
// (/proc/<pid>/fd/2: where the user reads mpirun's messages) and ends it with SIGKILL: the
// user's shell sees exit status 137 (128 + SIGKILL), the results file is already complete.
// SIGKILL, not SIGTERM, because SIGTERM crashes it (above). What it leaves: mpirun's session
// folder under TMPDIR (ompi.<host>.<uid>/), and on the cut-off node the daemon, which
// Open MPI ends only when its TCP gives up; the node's scalebench ranks end themselves at
// their deadline (Note [Worker deadline] in protocol/worker_loop.h).
//
// Not guarded: a rank whose parent is anything else. Under srun (slurmstepd) Slurm ends the
// step's processes itself; under an orted (mpirun on another host, e.g. a login node) the
// launcher is out of reach, and the job ends when TCP gives up (docs/reliability.md).
// Rejected: rank 0 killing its parent at once (the usual, reachable case deserves mpirun's
// own orderly end and exit status 4), waiting longer than needed (a user waits), and
// changing mpirun's TCP settings (pidfd_getfd of its sockets needs ptrace rights that Yama
// denies to a child).
inline constexpr double kLauncherEndGraceS = 10;

/// Note [Launcher guard]: if this process's parent is Open MPI's launcher, starts a guard
/// that ends it (SIGKILL, after one line on its stderr naming `reason`) unless it has ended
/// within `grace_s` seconds. Otherwise, or where pidfds are missing (Linux < 5.3), does
/// nothing. Call it right before this rank ends the job (MPI_Abort, _exit). Only forks and
/// makes system calls after the fork, so it may be called from a thread while another holds
/// locks (a stuck main thread). Never throws.
void guard_launcher_end(const char* reason, double grace_s = kLauncherEndGraceS) noexcept;

/// Whether a process named `comm` (as /proc/<pid>/comm shows it) is Open MPI's launcher.
bool is_open_mpi_launcher(const char* comm) noexcept;

}  // namespace scalebench
