#include "matrix/git_repo.h"

#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "common/base/subprocess.h"
#include "tests/unit/common/git_test_fixture.h"

namespace scalebench {
namespace {

using testing::FixtureRepo;
using testing::git_in;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

std::string input_error_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError thrown>";
}

TEST(GitRefSyntax, AcceptsOrdinaryRefNamesAndCommitIds) {
  for (const std::string ref :
       {"main", "feature/x-1", "release-1.2", "v1.0", "user@host", "a+b", "a=b,c", "HEAD",
        "refs/heads/main", "origin/main", "_private", "0123456789abcdef0123456789abcdef01234567",
        "0123456789ABCDEF0123456789ABCDEF01234567"}) {
    EXPECT_EQ(ref_syntax_problem(ref), "") << ref;
  }
  EXPECT_TRUE(is_full_commit_id("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_TRUE(is_full_commit_id(std::string(64, 'a')));
  EXPECT_FALSE(is_full_commit_id("0123456"));
  EXPECT_FALSE(is_full_commit_id(std::string(40, 'g')));
}

struct HostileRef {
  std::string ref;
  std::string why;  ///< a fragment the message must contain
};

std::vector<HostileRef> hostile_refs(const std::string& canary) {
  return {
      {"-main", "starts with '-'"},
      {"--upload-pack=touch " + canary, "starts with '-'"},
      {"--output=" + canary, "starts with '-'"},
      {"$(touch " + canary + ")", "shell metacharacter"},
      {"$(id)", "shell metacharacter"},
      {"`touch${IFS}" + canary + "`", "shell metacharacter"},
      {"main;touch${IFS}" + canary, "';', a shell metacharacter"},
      {"main|id", "shell metacharacter"},
      {"main&&id", "shell metacharacter"},
      {"main..feature", "'..'"},
      {"main@{1}", "'@{'"},
      {"@{-1}", "'@{'"},
      {"main.lock", "'.lock'"},
      {"feature/x.lock/y", "'.lock'"},
      {"main\ntouch " + canary, "a newline"},
      {"", "is empty"},
      {"my branch", "contains a space"},
      {"main~1", "revision syntax"},
      {"main^", "revision syntax"},
      {"main:file", "revision syntax"},
      {"ma?n", "revision syntax"},
      {"ma*", "revision syntax"},
      {"ma[in]", "revision syntax"},
      {"ma\\in", "revision syntax"},
      {std::string("ma\x01in"), "control character \\x01"},
      {std::string("main\x7f"), "control character \\x7f"},
      {"main\t", "a tab"},
      {"/main", "empty path component"},
      {"main/", "empty path component"},
      {"a//b", "empty path component"},
      {".hidden", "starting with '.'"},
      {"main.", "ends with '.'"},
      {"@", "shorthand for HEAD"},
      {"caf\xc3\xa9", "non-ASCII"},
      {std::string(256, 'a'), "at most 255"},
  };
}

TEST(GitRefSyntax, RejectsHostileRefsWithAClearInputErrorAndRunsNothing) {
  FixtureRepo fixture;
  const std::string canary = (fixture.root.path() / "canary").string();
  const auto refs = hostile_refs(canary);
  ASSERT_GE(refs.size(), 15U);
  for (const auto& [ref, why] : refs) {
    const std::string shown = quote_argv({ref});
    EXPECT_NE(ref_syntax_problem(ref), "") << shown;
    for (const auto& message :
         {input_error_message([&] { check_ref_syntax(ref, "m.yaml:3:5: branches[0]"); }),
          input_error_message([&] { resolve_ref(fixture.repo, ref, "m.yaml:3:5: branches[0]"); }),
          input_error_message([&] { checkout_branch(fixture.repo, ref, fixture.work); })}) {
      EXPECT_NE(message.find("ref " + shown + " is refused"), std::string::npos)
          << shown << " -> " << message;
      EXPECT_NE(message.find(why), std::string::npos) << shown << " -> " << message;
      EXPECT_NE(message.find("full 40-hex commit id"), std::string::npos) << message;
    }
  }
  EXPECT_NE(input_error_message([&] {
              check_ref_syntax("-x", "m.yaml:3:5: branches[0]");
            }).find("m.yaml:3:5: branches[0]: ref -x is refused"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(canary));
  EXPECT_FALSE(std::filesystem::exists(fixture.repo / "canary"));
  EXPECT_FALSE(std::filesystem::exists("canary"));
  EXPECT_FALSE(std::filesystem::exists(fixture.work / "worktrees"))
      << "checkout ran before refusal";
}

TEST(GitResolveRef, ResolvesBranchesTagsHeadAndCommitIds) {
  FixtureRepo fixture;
  EXPECT_EQ(resolve_ref(fixture.repo, "main"), fixture.main_commit);
  EXPECT_EQ(resolve_ref(fixture.repo, "feature"), fixture.feature_commit);
  EXPECT_EQ(resolve_ref(fixture.repo, "refs/heads/feature"), fixture.feature_commit);
  EXPECT_EQ(resolve_ref(fixture.repo, "v1"), fixture.main_commit);  // annotated tag, peeled
  EXPECT_EQ(resolve_ref(fixture.repo, "HEAD"), fixture.main_commit);
  EXPECT_EQ(resolve_ref(fixture.repo, fixture.feature_commit), fixture.feature_commit);
  std::string upper = fixture.feature_commit;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(resolve_ref(fixture.repo, upper), fixture.feature_commit);
  EXPECT_EQ(resolve_ref(fixture.repo, fixture.feature_commit.substr(0, 10)),
            fixture.feature_commit);
}

TEST(GitResolveRef, UnknownRefIsAnInputErrorNamingRefAndRepo) {
  FixtureRepo fixture;
  for (const std::string& ref :
       std::vector<std::string>{"no-such-branch", "feature/nope", std::string(40, '0')}) {
    const std::string message =
        input_error_message([&] { resolve_ref(fixture.repo, ref, "m.yaml:2:3: branches[1]"); });
    EXPECT_NE(message.find("m.yaml:2:3: branches[1]: ref " + ref + " names no commit in repo"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("git fetch"), std::string::npos) << message;
  }
}

TEST(GitResolveRef, RepoThatIsNotAGitRepositoryIsAnInputError) {
  TempDir dir;
  EXPECT_NE(
      input_error_message([&] { resolve_ref(dir.path(), "main"); }).find("is not a git repository"),
      std::string::npos);
  EXPECT_NE(input_error_message([&] {
              resolve_ref(dir.path() / "missing", "main");
            }).find("is not a directory"),
            std::string::npos);
}

TEST(GitCheckout, CreatesOneDetachedWorktreePerCommit) {
  FixtureRepo fixture;
  const ResolvedBranch main = checkout_branch(fixture.repo, "main", fixture.work);
  const ResolvedBranch feature = checkout_branch(fixture.repo, "feature", fixture.work);
  EXPECT_EQ(main.ref, "main");
  EXPECT_EQ(main.commit, fixture.main_commit);
  EXPECT_EQ(main.worktree, std::filesystem::absolute(fixture.work) / "worktrees" /
                               fixture.main_commit.substr(0, 12));
  EXPECT_EQ(main.worktree, worktree_path(fixture.work, fixture.main_commit));
  EXPECT_FALSE(main.worktree_reused);
  EXPECT_EQ(read_file(main.worktree / "a.txt"), "main\n");
  EXPECT_FALSE(std::filesystem::exists(main.worktree / "b.txt"));
  EXPECT_EQ(read_file(feature.worktree / "b.txt"), "feature\n");
  EXPECT_EQ(git_in(feature.worktree, {"rev-parse", "HEAD"}), fixture.feature_commit);
  EXPECT_EQ(git_in(feature.worktree, {"rev-parse", "--abbrev-ref", "HEAD"}), "HEAD");  // detached
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([+-]\d\d:\d\d|Z))");
  EXPECT_TRUE(std::regex_match(main.commit_date_iso, iso)) << main.commit_date_iso;
  EXPECT_EQ(main.commit_date_iso, git_in(fixture.repo, {"show", "-s", "--format=%cI", "main"}));
  // The annotated tag on main's commit shares main's worktree.
  const ResolvedBranch tag = checkout_branch(fixture.repo, "v1", fixture.work);
  EXPECT_EQ(tag.worktree, main.worktree);
  EXPECT_TRUE(tag.worktree_reused);
  // The user's own checkout is untouched.
  EXPECT_EQ(git_in(fixture.repo, {"rev-parse", "--abbrev-ref", "HEAD"}), "main");
}

TEST(GitCheckout, ReusesAndResetsAnExistingWorktree) {
  FixtureRepo fixture;
  const ResolvedBranch first = checkout_branch(fixture.repo, "feature", fixture.work);
  write_file(first.worktree / "a.txt", "modified\n");
  write_file(first.worktree / "model.pt", "exported\n");
  const ResolvedBranch second = checkout_branch(fixture.repo, "feature", fixture.work);
  EXPECT_TRUE(second.worktree_reused);
  EXPECT_EQ(second.worktree, first.worktree);
  EXPECT_EQ(read_file(second.worktree / "a.txt"), "main\n") << "tracked file not restored";
  EXPECT_EQ(read_file(second.worktree / "model.pt"), "exported\n") << "untracked file removed";
}

TEST(GitCheckout, PrunesStaleWorktreesAndRecreatesDeletedOnes) {
  FixtureRepo fixture;
  const ResolvedBranch feature = checkout_branch(fixture.repo, "feature", fixture.work);
  std::filesystem::remove_all(feature.worktree);
  EXPECT_NE(git_in(fixture.repo, {"worktree", "list", "--porcelain"}).find("prunable"),
            std::string::npos);
  checkout_branch(fixture.repo, "main", fixture.work);
  const std::string list = git_in(fixture.repo, {"worktree", "list", "--porcelain"});
  EXPECT_EQ(list.find(feature.worktree.string()), std::string::npos) << list;
  const ResolvedBranch again = checkout_branch(fixture.repo, "feature", fixture.work);
  EXPECT_FALSE(again.worktree_reused);
  EXPECT_EQ(read_file(again.worktree / "b.txt"), "feature\n");
}

TEST(GitCheckout, ReplacesAForeignDirectoryAtTheWorktreePath) {
  FixtureRepo fixture;
  const std::filesystem::path path = worktree_path(fixture.work, fixture.feature_commit);
  write_file(path / "junk.txt", "junk\n");
  const ResolvedBranch feature = checkout_branch(fixture.repo, "feature", fixture.work);
  EXPECT_FALSE(feature.worktree_reused);
  EXPECT_FALSE(std::filesystem::exists(path / "junk.txt"));
  EXPECT_EQ(git_in(path, {"rev-parse", "HEAD"}), fixture.feature_commit);
  // A worktree of the same repo moved to another commit is replaced too.
  git_in(path, {"checkout", "-q", "--detach", fixture.main_commit});
  const ResolvedBranch again = checkout_branch(fixture.repo, "feature", fixture.work);
  EXPECT_FALSE(again.worktree_reused);
  EXPECT_EQ(git_in(path, {"rev-parse", "HEAD"}), fixture.feature_commit);
}

TEST(GitCheckout, DirtyMeansTheRepoCheckoutOfThatCommitHasTrackedChanges) {
  FixtureRepo fixture;
  EXPECT_FALSE(checkout_branch(fixture.repo, "main", fixture.work).dirty);
  write_file(fixture.repo / "untracked.txt", "x\n");
  EXPECT_FALSE(checkout_branch(fixture.repo, "main", fixture.work).dirty) << "untracked counted";
  write_file(fixture.repo / "a.txt", "edited\n");
  EXPECT_TRUE(checkout_branch(fixture.repo, "main", fixture.work).dirty);
  EXPECT_TRUE(checkout_branch(fixture.repo, "v1", fixture.work).dirty) << "same commit as HEAD";
  EXPECT_FALSE(checkout_branch(fixture.repo, "feature", fixture.work).dirty) << "not checked out";
  git_in(fixture.repo, {"add", "a.txt"});  // staged only
  EXPECT_TRUE(checkout_branch(fixture.repo, "main", fixture.work).dirty);
  // The worktree holds the commit, not the edit.
  EXPECT_EQ(read_file(worktree_path(fixture.work, fixture.main_commit) / "a.txt"), "main\n");
}

TEST(GitCheckout, WorksFromABareRepositoryAndAWorkDirInsideTheRepo) {
  FixtureRepo fixture;
  const std::filesystem::path bare = fixture.root.path() / "bare.git";
  git_in(fixture.root.path(), {"clone", "-q", "--bare", fixture.repo.string(), bare.string()});
  const ResolvedBranch from_bare = checkout_branch(bare, "feature", fixture.root.path() / "w2");
  EXPECT_FALSE(from_bare.dirty);
  EXPECT_EQ(read_file(from_bare.worktree / "b.txt"), "feature\n");

  const std::filesystem::path inside = fixture.repo / ".scalebench-work";
  const ResolvedBranch first = checkout_branch(fixture.repo, "feature", inside);
  EXPECT_EQ(read_file(first.worktree / "b.txt"), "feature\n");
  EXPECT_TRUE(checkout_branch(fixture.repo, "feature", inside).worktree_reused);
  EXPECT_FALSE(checkout_branch(fixture.repo, "main", inside).dirty) << "untracked work dir counted";
}

TEST(GitCheckout, IgnoresTheCallersGitEnvironment) {
  FixtureRepo fixture;
  TempDir other;
  git_in(other.path(), {"init", "-q"});
  // As inside a git hook: these would redirect every git call to another repository.
  ::setenv("GIT_DIR", (other.path() / ".git").c_str(), 1);
  ::setenv("GIT_WORK_TREE", other.path().c_str(), 1);
  std::string commit;
  EXPECT_NO_THROW(commit = resolve_ref(fixture.repo, "feature"));
  ::unsetenv("GIT_DIR");
  ::unsetenv("GIT_WORK_TREE");
  EXPECT_EQ(commit, fixture.feature_commit);
}

}  // namespace
}  // namespace scalebench
