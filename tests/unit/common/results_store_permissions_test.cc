// The results file keeps the permissions its owner gave it across every rewrite of Note
// [Results durability] (each update renames a new copy over it); a new file follows the
// umask. Also the results path checks of ResultsStore::create.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "common/base/error.h"
#include "results/store.h"
#include "results_store_test_util.h"

namespace scalebench {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

constexpr const char* kHash = "permissions00000";

struct stat stat_of(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(0, ::stat(path.c_str(), &info)) << path;
  return info;
}

mode_t mode_of(const fs::path& path) { return stat_of(path).st_mode & 07777; }

/// Sets the umask for the scope of the object.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;
  ~ScopedUmask() { ::umask(previous_); }

 private:
  mode_t previous_;
};

/// A group of this process other than `gid` that chown() accepts, if any (root: any).
std::optional<gid_t> other_group(gid_t gid) {
  std::vector<gid_t> groups(static_cast<size_t>(::getgroups(0, nullptr)) + 1);
  groups.resize(static_cast<size_t>(::getgroups(static_cast<int>(groups.size()), groups.data())));
  for (const gid_t g : groups) {
    if (g != gid) return g;
  }
  if (::geteuid() == 0) {
    const group* nogroup = ::getgrnam("nogroup");
    return nogroup != nullptr ? nogroup->gr_gid : gid + 1;
  }
  return std::nullopt;
}

TEST(ResultsStorePermissions, NewFileFollowsTheUmask) {
  const TempDir dir;
  const ScopedUmask mask(027);
  const auto path = dir.path() / "r.h5";
  ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  EXPECT_EQ(0640u, mode_of(path));
}

TEST(ResultsStorePermissions, EveryRewriteKeepsTheMode) {
  const TempDir dir;
  const ScopedUmask mask(022);
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  ASSERT_EQ(0644u, mode_of(path));
  ASSERT_EQ(0, ::chmod(path.c_str(), 0600));
  const CellSpec cell = testing_util::train_cell(1, 2, 1, 3);
  store.mark_running(cell, {1, 2});
  EXPECT_EQ(0600u, mode_of(path)) << "mark_running";
  store.batch([&] { store.complete_cell(cell, testing_util::full_results(cell)); });
  EXPECT_EQ(0600u, mode_of(path)) << "batch";
  ASSERT_EQ(0, ::chmod(path.c_str(), 0640));
  ResultsStore::open_for_resume(path, kHash);
  EXPECT_EQ(0640u, mode_of(path)) << "open_for_resume";
  ASSERT_EQ(0, ::chmod(path.c_str(), 0600));
  ResultsStore::create(path, testing_util::test_provenance(kHash), true);
  EXPECT_EQ(0600u, mode_of(path)) << "create --force";
}

TEST(ResultsStorePermissions, EveryRewriteKeepsTheGroup) {
  const TempDir dir;
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  const auto group = other_group(stat_of(path).st_gid);
  if (!group) GTEST_SKIP() << "this user is in one group only: no other group to chown to";
  ASSERT_EQ(0, ::chown(path.c_str(), static_cast<uid_t>(-1), *group));
  ASSERT_EQ(0, ::chmod(path.c_str(), 0640));
  store.mark_running(testing_util::train_cell(2), {1, 2});
  EXPECT_EQ(*group, stat_of(path).st_gid);
  EXPECT_EQ(0640u, mode_of(path));
}

TEST(ResultsStorePermissions, TemporaryCopyIsNeverWiderThanTheFile) {
  const TempDir dir;
  const ScopedUmask mask(0);
  const auto path = dir.path() / "r.h5";
  auto store = ResultsStore::create(path, testing_util::test_provenance(kHash), false);
  ASSERT_EQ(0666u, mode_of(path));
  ASSERT_EQ(0, ::chmod(path.c_str(), 0600));
  store.batch([&] {
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      EXPECT_EQ(0600u, mode_of(entry.path())) << entry.path();
    }
  });
}

TEST(ResultsStorePermissions, CreateRefusesADirectoryEvenWithForce) {
  const TempDir dir;
  const auto path = dir.path() / "out";
  fs::create_directories(path);
  for (const bool force : {false, true}) {
    try {
      ResultsStore::create(path, testing_util::test_provenance(kHash), force);
      ADD_FAILURE() << "created over a directory, force " << force;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_directory(path));
  }
}

}  // namespace
}  // namespace scalebench
