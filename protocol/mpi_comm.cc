#include "protocol/mpi_comm.h"

#include <utility>

namespace scalebench {

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
  install_mpi_error_returns();
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

Communicator::~Communicator() { reset(); }

Communicator::Communicator(Communicator&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
  }
  return *this;
}

void Communicator::reset() {
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) MPI_Comm_free(&comm_);  // destructor: nothing to report to
  }
  comm_ = MPI_COMM_NULL;
}

int Communicator::rank() const {
  int rank = -1;
  MPI_CHECK(MPI_Comm_rank(comm_, &rank));
  return rank;
}

int Communicator::size() const {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm_, &size));
  return size;
}

int world_rank() {
  int rank = -1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int world_size() {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  return size;
}

Communicator create_group_communicator(const std::vector<int>& members, int tag) {
  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  const int include_rc =
      MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group);
  MPI_Group_free(&world_group);
  MPI_CHECK(include_rc);
  MPI_Comm comm = MPI_COMM_NULL;
  const int create_rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm);
  MPI_Group_free(&group);
  MPI_CHECK(create_rc);
  return Communicator(comm);
}

Communicator split_shared_node(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  return Communicator(node);
}

void send_message(const std::vector<uint8_t>& bytes, int destination, Tag tag, MPI_Comm comm) {
  MPI_CHECK(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, destination,
                     static_cast<int>(tag), comm));
}

namespace {

ReceivedMessage receive_probed(const MPI_Status& status, MPI_Comm comm) {
  int count = 0;
  MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  ReceivedMessage message;
  message.source = status.MPI_SOURCE;
  message.tag = static_cast<Tag>(status.MPI_TAG);
  message.bytes.resize(static_cast<size_t>(count));
  MPI_CHECK(MPI_Recv(message.bytes.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, comm,
                     MPI_STATUS_IGNORE));
  return message;
}

}  // namespace

ReceivedMessage receive_message(int source, Tag tag, MPI_Comm comm) {
  MPI_Status status{};
  MPI_CHECK(MPI_Probe(source, static_cast<int>(tag), comm, &status));
  return receive_probed(status, comm);
}

std::optional<ReceivedMessage> try_receive_message(int source, const std::vector<Tag>& tags,
                                                   MPI_Comm comm) {
  for (const Tag tag : tags) {
    int flag = 0;
    MPI_Status status{};
    MPI_CHECK(MPI_Iprobe(source, static_cast<int>(tag), comm, &flag, &status));
    if (flag != 0) return receive_probed(status, comm);
  }
  return std::nullopt;
}

}  // namespace scalebench
