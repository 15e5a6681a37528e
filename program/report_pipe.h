// The channel a program writes its records to (Note [Program report channel]): a pipe whose
// write end the child holds as descriptor kPassedFd, read here without blocking.
#pragma once

#include <cstddef>
#include <string>

namespace scalebench::program {

/// The read end of a pipe, non-blocking, owned; drained into a text buffer.
class ReportPipe {
 public:
  /// Throws std::runtime_error when no pipe can be made.
  ReportPipe();
  ~ReportPipe();
  ReportPipe(const ReportPipe&) = delete;
  ReportPipe& operator=(const ReportPipe&) = delete;
  /// What the pipe is made to hold (Note [Report pipe capacity] in report_pipe.cc).
  static constexpr int kPipeBytes = 1 << 20;

  [[nodiscard]] int write_fd() const { return write_fd_; }
  /// The bytes the pipe holds (F_GETPIPE_SZ): kPipeBytes, or less where the system refuses.
  [[nodiscard]] int capacity() const;
  /// Closes this process's write end (once the child holds it), so that end of file means
  /// the program and everything it started closed theirs.
  void close_write();
  /// Appends what is there to `buffer`, never beyond `limit_bytes` in all, so a line is never
  /// read past the record limit (Note [Program record bounds]); returns the bytes read (0:
  /// nothing there, or `buffer` already holds `limit_bytes`).
  std::size_t drain(std::string& buffer, std::size_t limit_bytes);

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace scalebench::program
