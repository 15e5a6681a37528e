// Tests of the Slurm batch script (`scalebench submit --dry-run` output): resource lines,
// validation of hostile values, and the rendered script itself run by bash with fake
// `srun` and `scontrol` commands, so that quoting and signal forwarding are checked by
// the shell that will run them, not by string matching alone.
#include "orchestrator/submit_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error.h"

extern char** environ;

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

SubmitOptions gpu_options() {
  SubmitOptions o;
  o.scalebench_exe = "/opt/scalebench/bin/scalebench";
  o.matrix_path = "/home/u/matrix.yaml";
  o.output_path = "/home/u/results.h5";
  o.nodes = 2;
  o.gpus_per_node = 4;
  return o;
}

std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

TEST(SubmitScript, GpuLayoutAsksOneSlotPerGpuPlusTheOrchestrator) {
  const std::string script = render_batch_script(gpu_options());
  EXPECT_THAT(lines_starting_with(script, "#SBATCH"),
              ::testing::ElementsAre("#SBATCH --job-name=scalebench", "#SBATCH --nodes=2",
                                     "#SBATCH --ntasks-per-node=5", "#SBATCH --gpus-per-node=4",
                                     "#SBATCH --signal=B:USR1@300", "#SBATCH --no-requeue"));
  EXPECT_THAT(script, HasSubstr("\ntasks=9\n"));
  EXPECT_THAT(script, HasSubstr("srun --mpi=pmix --ntasks=\"$tasks\" --distribution=cyclic"));
  EXPECT_THAT(script, HasSubstr("\"$scalebench\" run \"$matrix\" -o \"$output\" --resume &"));
  EXPECT_EQ(script.rfind("#!/bin/bash\n", 0), 0U);
}

TEST(SubmitScript, CpuLayoutUsesWorkersPerNodeAndNoGpus) {
  SubmitOptions o = gpu_options();
  o.nodes = 3;
  o.gpus_per_node = 0;
  o.workers_per_node = 2;
  const SubmitLayout layout = submit_layout(o);
  EXPECT_EQ(layout.workers_per_node, 2);
  EXPECT_EQ(layout.tasks_per_node, 3);
  EXPECT_EQ(layout.total_tasks, 7);
  const std::string script = render_batch_script(o);
  EXPECT_THAT(script, HasSubstr("#SBATCH --ntasks-per-node=3\n"));
  EXPECT_THAT(script, Not(HasSubstr("--gpus")));
  EXPECT_THAT(script, HasSubstr("\ntasks=7\n"));
}

TEST(SubmitScript, OptionalDirectivesAndRequeue) {
  SubmitOptions o = gpu_options();
  o.partition = "gpu,gpu-long";
  o.time_limit = "1-02:00:00";
  o.account = "proj_42";
  o.constraint = "a100&[ib1|ib2]";
  o.signal_lead_s = 600;
  o.requeue = true;
  const std::string script = render_batch_script(o);
  for (const char* line : {"#SBATCH --partition=gpu,gpu-long\n", "#SBATCH --time=1-02:00:00\n",
                           "#SBATCH --account=proj_42\n", "#SBATCH --constraint=a100&[ib1|ib2]\n",
                           "#SBATCH --signal=B:USR1@600\n", "#SBATCH --requeue\n",
                           "#SBATCH --open-mode=append\n", "\nrequeue=1\n"}) {
    EXPECT_THAT(script, HasSubstr(line));
  }
  EXPECT_THAT(script, Not(HasSubstr("--no-requeue")));
}

TEST(SubmitScript, NoPlaceholderLeftAndBashAcceptsTheSyntax) {
  SubmitOptions o = gpu_options();
  o.setup_file = "/home/u/env.sh";
  const std::string script = render_batch_script(o);
  EXPECT_EQ(script.find('@', script.find("USR1@") + 5), std::string::npos) << script;
  char dir_template[] = "/tmp/scalebench_submit_syntax_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const fs::path file = fs::path(dir_template) / "job.sh";
  std::ofstream(file) << script;
  const std::string command = "bash -n " + shell_quote(file.string());
  EXPECT_EQ(std::system(command.c_str()), 0);
  fs::remove_all(dir_template);
}

struct BadValue {
  const char* flag;
  std::string value;
};

class HostileDirective : public ::testing::TestWithParam<BadValue> {};

TEST_P(HostileDirective, IsRejectedNamingTheFlag) {
  SubmitOptions o = gpu_options();
  const BadValue& bad = GetParam();
  const std::string flag = bad.flag;
  if (flag == "--partition") o.partition = bad.value;
  if (flag == "--account") o.account = bad.value;
  if (flag == "--constraint") o.constraint = bad.value;
  if (flag == "--time") o.time_limit = bad.value;
  if (flag == "--job-name") o.job_name = bad.value;
  try {
    (void)render_batch_script(o);
    FAIL() << "accepted " << flag << " '" << bad.value << "'";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(flag));
  }
}

INSTANTIATE_TEST_SUITE_P(
    SubmitScript, HostileDirective,
    ::testing::Values(BadValue{"--partition", "gpu long"}, BadValue{"--partition", "gpu'"},
                      BadValue{"--partition", "\"gpu\""}, BadValue{"--partition", "$(reboot)"},
                      BadValue{"--partition", "`id`"}, BadValue{"--partition", "gpu\n#SBATCH -x"},
                      BadValue{"--partition", "gpu;id"}, BadValue{"--partition", "gpu,"},
                      BadValue{"--account", "a b"}, BadValue{"--account", "a$HOME"},
                      BadValue{"--account", "a,b"}, BadValue{"--constraint", "a100 & ib"},
                      BadValue{"--constraint", "a100\nib"}, BadValue{"--constraint", "$(id)"},
                      BadValue{"--time", "1:00; rm -rf /"}, BadValue{"--time", "$(date)"},
                      BadValue{"--time", "1h"}, BadValue{"--time", "0"},
                      BadValue{"--job-name", "my job"}, BadValue{"--job-name", ""},
                      BadValue{"--job-name", "x`id`"},
                      BadValue{"--job-name", std::string(65, 'a')}));

TEST(SubmitScript, ResourceCountsAreChecked) {
  auto expect_rejected = [](SubmitOptions o, const char* flag) {
    try {
      validate_submit_options(o);
      FAIL() << "accepted, expected an error about " << flag;
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr(flag));
    }
  };
  SubmitOptions o = gpu_options();
  o.nodes = 0;
  expect_rejected(o, "--nodes");
  o = gpu_options();
  o.gpus_per_node = -1;
  expect_rejected(o, "--gpus-per-node");
  o = gpu_options();
  o.workers_per_node = 2;  // with GPUs: one worker per GPU, the flag is refused
  expect_rejected(o, "--workers-per-node");
  o = gpu_options();
  o.gpus_per_node = 0;  // CPU-only without --workers-per-node
  expect_rejected(o, "--workers-per-node");
  o = gpu_options();
  o.time_limit = "5";  // 300 s, equal to the default lead
  expect_rejected(o, "--signal-lead-s");
  o = gpu_options();
  o.signal_lead_s = 0;
  expect_rejected(o, "--signal-lead-s");
  o = gpu_options();
  o.output_path = "relative/results.h5";
  expect_rejected(o, "-o/--output");
  o = gpu_options();
  o.matrix_path = "/home/u/matrix\n.yaml";
  expect_rejected(o, "matrix");
}

TEST(SubmitScript, TimeLimitFormats) {
  const std::vector<std::pair<std::string, std::int64_t>> good{
      {"30", 1800},     {"30:15", 1815},   {"2:00:00", 7200},
      {"1-12", 129600}, {"1-0:30", 88200}, {"1-00:00:05", 86405}};
  for (const auto& [text, seconds] : good)
    EXPECT_EQ(parse_slurm_time_limit_s(text), seconds) << text;
  for (const char* text : {"", "abc", "1:2:3:4", "-1", "1-", "1h", " 5", "5 ", "0", "0:00"}) {
    EXPECT_THROW(parse_slurm_time_limit_s(text), InputError) << text;
  }
}

TEST(SubmitScript, SbatchJobId) {
  EXPECT_EQ(parse_sbatch_job_id("123\n"), "123");
  EXPECT_EQ(parse_sbatch_job_id("4567;cluster-a\n"), "4567");
  EXPECT_THROW(parse_sbatch_job_id(""), Error);
  EXPECT_THROW(parse_sbatch_job_id("Submitted batch job 5\n"), Error);
  EXPECT_THROW(parse_sbatch_job_id("12a\n"), Error);
}

TEST(SubmitScript, ShellQuote) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote("it's"), R"('it'\''s')");
  EXPECT_EQ(shell_quote(""), "''");
}

// ---- the rendered script run by bash, with fake srun / scontrol ------------------------

/// A scratch folder with fake `srun` and `scontrol` in bin/. The fake srun records its
/// arguments (NUL-separated) in srun.args, touches srun.started, then exits with the
/// status in $FAKE_SRUN_STATUS, or waits for SIGUSR1/SIGTERM and exits 3.
class FakeSlurm {
 public:
  FakeSlurm() {
    char dir_template[] = "/tmp/scalebench_submit_XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = dir_template;
    fs::create_directories(root_ / "bin");
    write_executable("srun", R"(#!/bin/bash
printf '%s\0' "$@" > "$FAKE_DIR/srun.args"
trap 'echo signalled > "$FAKE_DIR/srun.signal"; exit 3' USR1 TERM
touch "$FAKE_DIR/srun.started"
if [[ -n ${FAKE_SRUN_STATUS:-} ]]; then exit "$FAKE_SRUN_STATUS"; fi
while :; do sleep 0.05; done
)");
    write_executable("scontrol",
                     "#!/bin/bash\nprintf '%s\\n' \"$*\" > \"$FAKE_DIR/scontrol.args\"\n");
  }
  FakeSlurm(const FakeSlurm&) = delete;
  FakeSlurm& operator=(const FakeSlurm&) = delete;
  ~FakeSlurm() { fs::remove_all(root_); }

  [[nodiscard]] const fs::path& root() const { return root_; }

  /// Starts `bash script` with PATH led by the fakes; returns the child's pid.
  pid_t start(const std::string& script, const std::string& srun_status) {
    std::ofstream(root_ / "job.sh") << script;
    std::vector<std::string> env{"PATH=" + (root_ / "bin").string() + ":/usr/bin:/bin",
                                 "FAKE_DIR=" + root_.string(), "SLURM_JOB_ID=77",
                                 "FAKE_SRUN_STATUS=" + srun_status};
    std::vector<std::string> args{"/bin/bash", (root_ / "job.sh").string()};
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    for (auto& e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) {
      throw std::runtime_error("posix_spawn bash failed");
    }
    return pid;
  }

  static int wait_exit_status(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  [[nodiscard]] std::vector<std::string> srun_args() const {
    std::ifstream in(root_ / "srun.args", std::ios::binary);
    std::vector<std::string> out;
    for (std::string arg; std::getline(in, arg, '\0');) out.push_back(arg);
    return out;
  }

  [[nodiscard]] bool wait_for(const std::string& name) const {
    for (int i = 0; i < 200; ++i) {
      if (fs::exists(root_ / name)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

 private:
  void write_executable(const std::string& name, const std::string& text) {
    const fs::path path = root_ / "bin" / name;
    std::ofstream(path) << text;
    fs::permissions(path, fs::perms::owner_all);
  }

  fs::path root_;
};

TEST(SubmitScriptRun, HostilePathsReachSrunVerbatimAndNothingIsExecuted) {
  FakeSlurm fake;
  const fs::path hostile = fake.root() / "it's a $(touch pwned1) `touch pwned2` \"dir\" @OUTPUT@";
  fs::create_directories(hostile);
  const fs::path setup = hostile / "setup $(touch pwned3).sh";
  std::ofstream(setup) << "export FROM_SETUP=1\n";
  SubmitOptions o = gpu_options();
  o.nodes = 1;
  o.gpus_per_node = 2;
  o.scalebench_exe = hostile / "scalebench";
  o.matrix_path = hostile / "m;id.yaml";
  o.output_path = hostile / "out ' \\ $HOME.h5";
  o.setup_file = setup;
  const pid_t pid = fake.start(render_batch_script(o), "0");
  EXPECT_EQ(FakeSlurm::wait_exit_status(pid), 0);
  EXPECT_THAT(fake.srun_args(),
              ::testing::ElementsAre("--mpi=pmix", "--ntasks=3", "--distribution=cyclic",
                                     o.scalebench_exe.string(), "run", o.matrix_path.string(), "-o",
                                     o.output_path.string(), "--resume"));
  for (const char* marker : {"pwned1", "pwned2", "pwned3"}) {
    EXPECT_FALSE(fs::exists(fs::current_path() / marker)) << marker;
    EXPECT_FALSE(fs::exists(fake.root() / marker)) << marker;
  }
}

TEST(SubmitScriptRun, StepStatusIsTheJobStatusAndRequeueOnlyAfterInterrupt) {
  for (const bool requeue : {false, true}) {
    for (const std::string status : {"0", "1", "3"}) {
      FakeSlurm fake;
      SubmitOptions o = gpu_options();
      o.requeue = requeue;
      EXPECT_EQ(FakeSlurm::wait_exit_status(fake.start(render_batch_script(o), status)),
                std::stoi(status));
      EXPECT_EQ(fs::exists(fake.root() / "scontrol.args"), requeue && status == "3")
          << "requeue=" << requeue << " status=" << status;
    }
  }
}

TEST(SubmitScriptRun, Usr1ToTheBatchShellIsForwardedToTheStepTermIsNot) {
  FakeSlurm fake;
  SubmitOptions o = gpu_options();
  o.requeue = true;
  const pid_t pid = fake.start(render_batch_script(o), "");
  ASSERT_TRUE(fake.wait_for("srun.started"));
  // SIGTERM reaches the tasks from Slurm itself: the shell keeps waiting, forwards nothing.
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(fs::exists(fake.root() / "srun.signal"));
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the batch shell ended on SIGTERM";
  ASSERT_EQ(::kill(pid, SIGUSR1), 0);
  EXPECT_EQ(FakeSlurm::wait_exit_status(pid), 3);
  ASSERT_TRUE(fs::exists(fake.root() / "srun.signal"));
  std::ifstream requeue(fake.root() / "scontrol.args");
  std::string line;
  std::getline(requeue, line);
  EXPECT_EQ(line, "requeue 77");
}

}  // namespace
}  // namespace scalebench
