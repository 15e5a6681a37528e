#include "program/torchrun_layout.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <vector>

#include "protocol/mpi_check.h"

namespace scalebench::program {

namespace {

/// A TCP port that was free a moment ago (bind to port 0), for MASTER_PORT; 0 when none
/// could be found (no socket or no bind: the cell then fails in phase setup).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

/// The hosts of the group's ranks, in group-rank order.
std::vector<std::string> group_hosts(const std::string& host, MPI_Comm group, int size) {
  constexpr int kHostBytes = 256;
  std::array<char, kHostBytes> mine{};
  host.copy(mine.data(), kHostBytes - 1);
  std::vector<char> all(static_cast<size_t>(kHostBytes) * static_cast<size_t>(size));
  MPI_CHECK(
      MPI_Allgather(mine.data(), kHostBytes, MPI_CHAR, all.data(), kHostBytes, MPI_CHAR, group));
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    hosts.emplace_back(all.data() + static_cast<size_t>(r) * kHostBytes);
  return hosts;
}

}  // namespace

TorchrunLayout torchrun_layout(const std::string& host, MPI_Comm group) {
  TorchrunLayout layout;
  MPI_CHECK(MPI_Comm_rank(group, &layout.rank));
  MPI_CHECK(MPI_Comm_size(group, &layout.world));
  const auto hosts = group_hosts(host, group, layout.world);
  std::vector<std::string> nodes;
  for (int r = 0; r < layout.world; ++r) {
    if (std::find(nodes.begin(), nodes.end(), hosts[r]) == nodes.end()) nodes.push_back(hosts[r]);
    if (hosts[r] == host) {
      if (r < layout.rank) ++layout.local_rank;
      ++layout.local_world;
    }
  }
  layout.node_rank = static_cast<int>(std::find(nodes.begin(), nodes.end(), host) - nodes.begin());
  layout.nodes = static_cast<int>(nodes.size());
  layout.master_addr = hosts[0];
  layout.master_port = layout.rank == 0 ? free_port() : 0;
  MPI_CHECK(MPI_Bcast(&layout.master_port, 1, MPI_INT, 0, group));
  return layout;
}

}  // namespace scalebench::program
