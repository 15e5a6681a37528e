#include "program/report_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>

namespace scalebench::program {

ReportPipe::ReportPipe() {
  std::array<int, 2> fds{-1, -1};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  ::fcntl(read_fd_, F_SETFL, ::fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
  // Note [Report pipe capacity]: the worker reads the pipe at each check of the running
  // program (every 50 ms, Subprocess's poll slice), so a 64 KiB pipe blocked a program that
  // wrote more than 1.3 MB/s of records inside its timed steps. kPipeBytes holds 1 MiB, a
  // check's reading (program_run.cc): 20 MB/s. Where fs.pipe-max-size is lower the pipe keeps
  // its size; nothing fails for it.
  ::fcntl(write_fd_, F_SETPIPE_SZ, kPipeBytes);
}

int ReportPipe::capacity() const { return ::fcntl(read_fd_, F_GETPIPE_SZ); }

ReportPipe::~ReportPipe() {
  close_write();
  if (read_fd_ >= 0) ::close(read_fd_);
}

void ReportPipe::close_write() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

std::size_t ReportPipe::drain(std::string& buffer, std::size_t limit_bytes) {
  std::size_t read = 0;
  std::array<char, 65536> chunk{};
  while (buffer.size() < limit_bytes) {
    const ssize_t n =
        ::read(read_fd_, chunk.data(), std::min(chunk.size(), limit_bytes - buffer.size()));
    if (n > 0) {
      buffer.append(chunk.data(), static_cast<size_t>(n));
      read += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // nothing there (EAGAIN) or every write end closed
  }
  return read;
}

}  // namespace scalebench::program
