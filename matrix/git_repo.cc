#include "matrix/git_repo.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <system_error>
#include <vector>

#include "common/base/diagnostics.h"
#include "common/base/subprocess.h"

namespace scalebench {
namespace {

constexpr std::size_t kMaxRefBytes = 255;
constexpr double kGitTimeoutS = 600.0;  // worktree add of a large tree can take a while
constexpr std::size_t kWorktreeDirHexDigits = 12;
constexpr std::size_t kMaxTreePathBytes = 4096;
// Characters git reads as revision or pathspec syntax inside `<commit>:<path>`.
constexpr const char* kTreePathSyntax = "\\:*?[]^~{}";

// Characters git gives a meaning inside a revision (ancestry, paths, globs, reflog).
constexpr const char* kRevisionSyntax = "~^:?*[\\{}";
// Characters a POSIX shell would interpret.
constexpr const char* kShellSyntax = "$`;|&()<>'\"!#";

std::string describe_char(unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (c == '\n') return "a newline";
  if (c == '\t') return "a tab";
  if (c == ' ') return "a space";
  if (c < 0x20 || c == 0x7f)
    return std::string("the control character \\x") + kHex[c >> 4] + kHex[c & 0xf];
  if (c >= 0x80) return std::string("the non-ASCII byte \\x") + kHex[c >> 4] + kHex[c & 0xf];
  return std::string("'") + static_cast<char>(c) + "'";
}

bool is_allowed_char(unsigned char c) {
  return std::isalnum(c) != 0 || (c != 0 && std::strchr("._/-+@=,", c) != nullptr);
}

std::string component_problem(const std::string& ref) {
  std::size_t begin = 0;
  while (begin <= ref.size()) {
    const std::size_t slash = std::min(ref.find('/', begin), ref.size());
    const std::string component = ref.substr(begin, slash - begin);
    if (component.empty()) return "has an empty path component (a leading, trailing or double '/')";
    if (component.front() == '.')
      return "has a path component starting with '.' ('" + component + "')";
    if (component.size() >= 5 && component.ends_with(".lock"))
      return "has a path component ending in '.lock', which git reserves for lock files";
    begin = slash + 1;
  }
  return {};
}

std::string char_problem(const std::string& ref) {
  for (unsigned char c : ref) {
    if (is_allowed_char(c)) continue;
    const std::string what = describe_char(c);
    if (c < 0x20 || c == 0x7f) return "contains " + what;
    if (c == ' ') return "contains a space";
    if (std::strchr(kRevisionSyntax, c) != nullptr)
      return "contains " + what + ", which git reads as revision syntax (ancestors, paths, globs)";
    if (std::strchr(kShellSyntax, c) != nullptr)
      return "contains " + what +
             ", a shell metacharacter (scalebench never runs a shell, but "
             "refuses such names so that no copy-pasted command can be tricked either)";
    return "contains " + what + "; allowed are ASCII letters, digits and . _ / - + @ = ,";
  }
  return {};
}

std::string shown(const std::string& ref) { return quote_argv({ref}); }

std::string context(const std::string& where) { return where.empty() ? "branches" : where; }

/// Runs git with scalebench's hardening (see the contract in git_repo.h); never throws for
/// a non-zero exit, throws GitError when git cannot be started.
/// `file`/`line` default to the caller's position (GCC and Clang builtins; Clang 14 with
/// libstdc++ 12 has no std::source_location).
SubprocessResult git(const std::filesystem::path& dir, const std::vector<std::string>& args,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  SubprocessOptions options;
  options.argv = {"git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"};
  if (!dir.empty()) {
    options.argv.emplace_back("-C");
    options.argv.push_back(dir.string());
  }
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.set_environment = {
      {"GIT_TERMINAL_PROMPT", "0"}, {"GIT_OPTIONAL_LOCKS", "0"}, {"LC_ALL", "C"}};
  options.unset_environment = {"GIT_DIR",
                               "GIT_WORK_TREE",
                               "GIT_INDEX_FILE",
                               "GIT_OBJECT_DIRECTORY",
                               "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                               "GIT_COMMON_DIR",
                               "GIT_NAMESPACE",
                               "GIT_PREFIX"};
  options.separate_stderr = true;
  options.timeout_s = kGitTimeoutS;
  try {
    return run_subprocess(std::move(options));
  } catch (const SubprocessError& e) {
    throw GitError(format_library_error("git", file, line, "cannot run git",
                                        std::string(e.what()) + "; install git or put it on PATH"));
  }
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

/// Runs git and throws GitError unless it exits 0; returns its result (stdout untrimmed).
SubprocessResult git_checked(const std::filesystem::path& dir, const std::vector<std::string>& args,
                             const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  SubprocessResult result = git(dir, args, file, line);
  if (!result.ok()) {
    throw GitError(format_library_error("git", file, line,
                                        "git -C " + shown(dir.string()) + " " + quote_argv(args) +
                                            ": " + result.describe(kGitTimeoutS),
                                        tail_lines(trimmed(result.error_output), 20, 4096)));
  }
  return result;
}

/// git_checked's trimmed stdout.
std::string git_ok(const std::filesystem::path& dir, const std::vector<std::string>& args,
                   const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return trimmed(git_checked(dir, args, file, line).output);
}

std::filesystem::path absolute_repo(const std::filesystem::path& repo, const std::string& where) {
  std::error_code ec;
  std::filesystem::path path = std::filesystem::absolute(repo, ec);
  if (ec || !std::filesystem::is_directory(path, ec)) {
    throw InputError(context(where) + ": repo " + shown(repo.string()) +
                     " is not a directory; set `repo:` to the path of a git checkout");
  }
  const SubprocessResult probe = git(path, {"rev-parse", "--git-dir"});
  if (!probe.ok()) {
    throw InputError(context(where) + ": repo " + shown(path.string()) +
                     " is not a git repository (git: " + trimmed(probe.error_output) +
                     "); set `repo:` to the path of a git checkout");
  }
  return path;
}

std::filesystem::path common_dir(const std::filesystem::path& dir) {
  const SubprocessResult result =
      git(dir, {"rev-parse", "--path-format=absolute", "--git-common-dir"});
  if (!result.ok()) return {};
  std::error_code ec;
  return std::filesystem::weakly_canonical(trimmed(result.output), ec);
}

/// `dir` is the top of a worktree of the repository whose common dir is `repo_common`,
/// with `commit` checked out.
bool is_worktree_at(const std::filesystem::path& dir, const std::filesystem::path& repo_common,
                    const std::string& commit) {
  const SubprocessResult top = git(dir, {"rev-parse", "--show-toplevel"});
  std::error_code ec;
  if (!top.ok() || std::filesystem::weakly_canonical(trimmed(top.output), ec) !=
                       std::filesystem::weakly_canonical(dir, ec))
    return false;  // not a worktree, or a plain directory inside some other checkout
  if (common_dir(dir) != repo_common) return false;
  const SubprocessResult head = git(dir, {"rev-parse", "--verify", "--quiet", "HEAD"});
  return head.ok() && trimmed(head.output) == commit;
}

bool repo_checkout_is_dirty_at(const std::filesystem::path& repo, const std::string& commit) {
  if (git_ok(repo, {"rev-parse", "--is-bare-repository"}) == "true") return false;
  const SubprocessResult head = git(repo, {"rev-parse", "--verify", "--quiet", "HEAD"});
  if (!head.ok() || trimmed(head.output) != commit) return false;
  return !git_ok(repo, {"status", "--porcelain", "--untracked-files=no"}).empty();
}

}  // namespace

void remove_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir) {
  if (!git(repo, {"worktree", "remove", "--force", "--force", "--", dir.string()}).ok()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) {
      throw GitError("cannot remove the worktree directory " + shown(dir.string()) + ": " +
                     ec.message() + "; remove it by hand");
    }
  }
  git_ok(repo, {"worktree", "prune"});
}

bool is_full_commit_id(const std::string& ref) {
  return (ref.size() == 40 || ref.size() == 64) &&
         std::all_of(ref.begin(), ref.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

std::string ref_syntax_problem(const std::string& ref) {
  if (ref.empty()) return "is empty";
  if (ref.size() > kMaxRefBytes)
    return "is " + std::to_string(ref.size()) + " bytes long (at most " +
           std::to_string(kMaxRefBytes) + ")";
  if (ref.front() == '-')
    return "starts with '-', so git would read it as an option (e.g. --upload-pack=<command>)";
  if (ref.find("@{") != std::string::npos) return "contains '@{', git's reflog syntax";
  if (std::string problem = char_problem(ref); !problem.empty()) return problem;
  if (ref.find("..") != std::string::npos) return "contains '..', git's range syntax";
  if (ref == "@") return "is '@', git's shorthand for HEAD (write HEAD)";
  if (std::string problem = component_problem(ref); !problem.empty()) return problem;
  if (ref.back() == '.') return "ends with '.'";
  return {};
}

void check_ref_syntax(const std::string& ref, const std::string& where) {
  const std::string problem = ref_syntax_problem(ref);
  if (problem.empty()) return;
  throw InputError(
      context(where) + ": ref " + shown(ref) + " is refused: it " + problem +
      ". Write the branch or tag name exactly as `git branch --list` / `git tag` "
      "show it, or the full 40-hex commit id (`git rev-parse <ref>`); nothing was run.");
}

std::string resolve_ref(const std::filesystem::path& repo, const std::string& ref,
                        const std::string& where) {
  check_ref_syntax(ref, where);
  const std::filesystem::path path = absolute_repo(repo, where);
  const SubprocessResult format = git({}, {"check-ref-format", "--allow-onelevel", ref});
  if (!format.ok()) {
    throw InputError(context(where) + ": ref " + shown(ref) +
                     " is refused: `git check-ref-format` rejects it as a ref name. Write the "
                     "branch or tag name as git shows it, or the full commit id.");
  }
  const SubprocessResult result =
      git(path, {"rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}"});
  std::string commit = trimmed(result.output);
  if (!result.ok() || !is_full_commit_id(commit)) {
    // The closest of the repository's own branch and tag names, as for a misspelt key.
    const SubprocessResult refs = git(path, {"for-each-ref", "--format=%(refname:short)",
                                             "refs/heads", "refs/tags", "refs/remotes"});
    std::vector<std::string> names;
    if (refs.ok()) {
      std::string line;
      for (const char c : refs.output) {
        if (c != '\n') {
          line += c;
        } else if (!line.empty()) {
          names.push_back(std::move(line));
          line.clear();
        }
      }
      if (!line.empty()) names.push_back(std::move(line));
    }
    const std::string suggestion = closest_match(ref, names);
    throw InputError(context(where) + ": ref " + shown(ref) + " names no commit in repo " +
                     shown(path.string()) +
                     " (no such branch, tag, remote-tracking branch or commit id there)" +
                     (suggestion.empty() ? "." : "; did you mean " + shown(suggestion) + "?") +
                     " Check the spelling (`git -C <repo> branch -a`), or fetch it first (`git "
                     "fetch`).");
  }
  std::transform(commit.begin(), commit.end(), commit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return commit;
}

std::filesystem::path worktree_path(const std::filesystem::path& work_dir,
                                    const std::string& commit) {
  return std::filesystem::absolute(work_dir) / "worktrees" /
         commit.substr(0, kWorktreeDirHexDigits);
}

ResolvedBranch checkout_branch(const std::filesystem::path& repo, const std::string& ref,
                               const std::filesystem::path& work_dir, const std::string& where) {
  ResolvedBranch branch;
  branch.ref = ref;
  branch.commit = resolve_ref(repo, ref, where);
  const std::filesystem::path repo_path = std::filesystem::absolute(repo);
  branch.worktree = worktree_path(work_dir, branch.commit);
  std::error_code ec;
  std::filesystem::create_directories(branch.worktree.parent_path(), ec);
  if (ec) {
    throw InputError(context(where) + ": cannot create " + shown(branch.worktree.parent_path()) +
                     ": " + ec.message() + "; choose a writable work directory");
  }
  git_ok(repo_path, {"worktree", "prune"});
  if (std::filesystem::exists(branch.worktree, ec)) {
    if (is_worktree_at(branch.worktree, common_dir(repo_path), branch.commit)) {
      git_ok(branch.worktree, {"reset", "--hard", "--quiet", branch.commit});
      branch.worktree_reused = true;
    } else {
      remove_worktree(repo_path, branch.worktree);
    }
  }
  if (!branch.worktree_reused) {
    git_ok(repo_path, {"worktree", "add", "--detach", "--quiet", "--", branch.worktree.string(),
                       branch.commit});
  }
  branch.commit_date_iso =
      git_ok(repo_path, {"show", "-s", "--format=%cI", "--end-of-options", branch.commit});
  branch.dirty = repo_checkout_is_dirty_at(repo_path, branch.commit);
  return branch;
}

std::string tree_path_problem(const std::string& path) {
  if (path.empty()) return "is empty";
  if (path.size() > kMaxTreePathBytes)
    return "is " + std::to_string(path.size()) + " bytes long (at most " +
           std::to_string(kMaxTreePathBytes) + ")";
  if (path.front() == '/') return "starts with '/'; write it relative to the repository's root";
  for (unsigned char c : path) {
    if (c <= 0x20 || c >= 0x7f) return "contains " + describe_char(c);
    if (std::strchr(kTreePathSyntax, c) != nullptr)
      return "contains " + describe_char(c) + ", which git reads as revision or pathspec syntax";
  }
  std::size_t begin = 0;
  while (begin <= path.size()) {
    const std::size_t slash = std::min(path.find('/', begin), path.size());
    const std::string component = path.substr(begin, slash - begin);
    if (component.empty()) return "has an empty path component (a trailing or double '/')";
    if (component == "." || component == "..")
      return "has a '" + component + "' path component; write the path without it";
    begin = slash + 1;
  }
  return {};
}

std::string read_file_at_commit(const std::filesystem::path& repo, const std::string& commit,
                                const std::string& path, const std::string& ref,
                                const std::string& where) {
  const std::string prefix = where.empty() ? std::string() : where + ": ";
  if (!is_full_commit_id(commit)) {
    throw Error(prefix + "read_file_at_commit needs a full commit id, got " + shown(commit) +
                " (resolve the ref with resolve_ref first)");
  }
  if (const std::string problem = tree_path_problem(path); !problem.empty()) {
    throw InputError(prefix + "path " + shown(path) + " is refused: it " + problem);
  }
  const std::filesystem::path repo_path = absolute_repo(repo, where);
  const std::string named = "ref " + shown(ref.empty() ? commit : ref) + " (commit " + commit +
                            ") of repo " + shown(repo_path.string());
  const std::string object = commit + ":" + path;
  const SubprocessResult type = git(repo_path, {"cat-file", "-t", object});
  if (!type.ok()) {
    throw InputError(prefix + path + " does not exist in " + named +
                     ". Add the file to that branch and commit it, fix the name, or remove the "
                     "branch from the matrix; `git -C " +
                     shown(repo_path.string()) + " ls-tree -r --name-only " +
                     commit.substr(0, kWorktreeDirHexDigits) + "` lists the files there");
  }
  if (trimmed(type.output) != "blob") {
    throw InputError(prefix + path + " is a " + trimmed(type.output) + ", not a file, in " + named +
                     "; name a file");
  }
  const SubprocessResult result = git_checked(repo_path, {"show", "--end-of-options", object});
  if (result.output_truncated) {
    throw InputError(prefix + path + " in " + named +
                     " is larger than 16 MiB, too large for a configuration file; shrink it");
  }
  return result.output;
}

}  // namespace scalebench
