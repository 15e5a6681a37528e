// Git refs and worktrees for the `repo:` / `branches:` axis of a matrix (rank 0 only).
//
// Contract:
//  * No shell anywhere: git runs through run_subprocess with an argument vector, refs are
//    validated by scalebench's own rules (check_ref_syntax) and by `git check-ref-format`
//    before any git command sees them, and every git command that takes a revision gets
//    `--end-of-options` before it.
//  * Every git call runs with hooks disabled (core.hooksPath=/dev/null), fsmonitor off,
//    GIT_TERMINAL_PROMPT=0, GIT_OPTIONAL_LOCKS=0, LC_ALL=C, and without the caller's
//    GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE / ... (which a git hook would have set).
//  * Bad user input (a refused or unknown ref, a repo that is not a git repository) throws
//    InputError naming the ref, the reason and what to change. Git failing for another
//    reason throws GitError (host, rank, file:line, git's own message).
//  * Not thread-safe for one work directory: only rank 0 calls these, one at a time.
// See docs/branches.md for the user-facing description.
#pragma once

#include <filesystem>
#include <string>

#include "common/base/error.h"

namespace scalebench {

/// git failed for a reason other than bad user input (disk full, corrupt repository, git
/// missing from PATH, ...).
class GitError : public LibraryError {
 public:
  explicit GitError(const std::string& message) : LibraryError("git", message) {}
};

/// Why scalebench refuses `ref` ("" when it is accepted). Pure: no git, no file access.
/// Accepted: ASCII letters, digits and `. _ / - + @ = ,`, not starting with '-', no `..`,
/// no `@{`, no empty, '.'-leading or '.lock'-ending path component, not `@` alone, at most
/// 255 bytes. Full commit ids (40 or 64 hex digits) are a special case of these rules.
std::string ref_syntax_problem(const std::string& ref);

/// Throws InputError when ref_syntax_problem(ref) is not empty. `where` prefixes the
/// message (e.g. "matrix.yaml:4:13: branches[1]"); empty gives "branches".
void check_ref_syntax(const std::string& ref, const std::string& where = {});

/// True for a full commit id: exactly 40 (SHA-1) or 64 (SHA-256) hexadecimal digits.
bool is_full_commit_id(const std::string& ref);

/// Validates `ref` (check_ref_syntax, then `git check-ref-format --allow-onelevel`) and
/// resolves it in `repo` with `git rev-parse --verify --end-of-options <ref>^{commit}`
/// (branches, tags (peeled), remote-tracking branches, HEAD, full or abbreviated commit
/// ids). Returns the full commit id in lowercase hex. Throws InputError when `repo` is not
/// a git repository or the ref is refused or names no commit there.
std::string resolve_ref(const std::filesystem::path& repo, const std::string& ref,
                        const std::string& where = {});

/// One branch of the matrix, resolved and checked out.
struct ResolvedBranch {
  std::string ref;              ///< as written in the matrix
  std::string commit;           ///< full commit id (hex)
  std::string commit_date_iso;  ///< committer date, strict ISO 8601 (`git show -s --format=%cI`)
  /// The commit is the one checked out in `repo`'s own working tree (its HEAD) and that
  /// working tree has uncommitted changes to tracked files (staged or not; untracked files
  /// do not count). Those changes are NOT part of what is benchmarked: the worktree holds
  /// the commit only. Always false for a bare repository.
  bool dirty = false;
  std::filesystem::path worktree;  ///< absolute: <work_dir>/worktrees/<commit[:12]>
  bool worktree_reused = false;    ///< an existing worktree of this commit was reused
};

/// Where the worktree of `commit` lives: <work_dir>/worktrees/<first 12 hex digits>.
std::filesystem::path worktree_path(const std::filesystem::path& work_dir,
                                    const std::string& commit);

/// Resolves `ref` (as resolve_ref), prunes stale worktree records of `repo`
/// (`git worktree prune`), then reuses or creates the detached worktree of the commit at
/// worktree_path(work_dir, commit) (`git worktree add --detach`). A reused worktree is
/// reset to the commit (tracked files restored; untracked files, e.g. earlier prepare
/// outputs, kept). A directory at that path that is not a worktree of `repo` at that commit
/// is removed and recreated. Fills every field of ResolvedBranch.
ResolvedBranch checkout_branch(const std::filesystem::path& repo, const std::string& ref,
                               const std::filesystem::path& work_dir,
                               const std::string& where = {});

/// Removes the worktree at `dir` of `repo` (`git worktree remove --force --force`, else the
/// folder itself) and forgets stale worktree records (`git worktree prune`). Throws GitError
/// when the folder cannot be removed.
void remove_worktree(const std::filesystem::path& repo, const std::filesystem::path& dir);

/// Why scalebench refuses `path` as a path inside a commit's tree ("" when accepted). Pure.
/// Accepted: non-empty, relative, components separated by single '/', no component "." or
/// "..", only printable ASCII without spaces or `\ : * ? [ ] ^ ~ { }`, at most 4096 bytes.
std::string tree_path_problem(const std::string& path);

/// The bytes of the file `path` (relative to the tree's root) in `commit` of `repo`, read
/// with `git -C <repo> show --end-of-options <commit>:<path>`: read-only, no worktree, no
/// textconv. `commit` must be a full commit id (resolve_ref's result); `ref` is the name the
/// user wrote for it (for messages). Throws InputError, naming repo, ref, commit and path
/// and what to change, when `repo` is not a git repository, `path` is refused
/// (tree_path_problem), or there is no such file (or only a directory) at that commit; a
/// file larger than the subprocess capture limit (16 MiB) is refused as well. `where`
/// prefixes those messages. Throws GitError when git fails otherwise.
std::string read_file_at_commit(const std::filesystem::path& repo, const std::string& commit,
                                const std::string& path, const std::string& ref = {},
                                const std::string& where = {});

}  // namespace scalebench
