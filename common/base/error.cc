#include "common/base/error.h"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <sstream>

namespace scalebench {

std::string hostname() {
  std::array<char, 256> buffer{};
  if (gethostname(buffer.data(), buffer.size() - 1) != 0) return {};
  return std::string(buffer.data());
}

int world_rank_or_minus_one() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string format_library_error(const std::string& library, const char* file, int line,
                                 const std::string& detail, const std::string& reason) {
  std::ostringstream out;
  out << "host=" << hostname() << " rank=" << world_rank_or_minus_one() << " " << file << ":"
      << line << ": " << library << " error: " << detail;
  if (!reason.empty()) out << ": " << reason;
  return out.str();
}

}  // namespace scalebench
