// Every file npukit reads or writes goes through these helpers, so one rule holds at the file
// boundary:
//   - reads are bounded (a size limit naming the file and the limit) and refuse anything that is
//     not a regular file (a directory, /dev/zero, a FIFO) by name, before reading a byte;
//   - writes go to a temporary name in the destination directory and are renamed into place only
//     when everything a command produces has succeeded, so an error leaves nothing behind.
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npukit {

// Binary inputs (models, GML/DWP streams, calibration sets, .npy): protobuf's 2 GiB limit.
inline constexpr std::uint64_t kMaxBinaryFileBytes = std::uint64_t{2} << 30;
// Text inputs (manifests, JSON case files, assembler listings).
inline constexpr std::uint64_t kMaxTextFileBytes = std::uint64_t{256} << 20;

// Reads a whole regular file of at most `max_bytes`. Throws npukit::Error naming the path when it
// does not exist, is a directory, device, FIFO or socket, is larger than the limit, or cannot be
// read. The one-argument read_file_bytes (common/npy.h) uses kMaxBinaryFileBytes.
Bytes read_file_bytes(const std::string& path);
Bytes read_file_bytes(const std::string& path, std::uint64_t max_bytes);
std::string read_text_file(const std::string& path, std::uint64_t max_bytes = kMaxTextFileBytes);
// read_file_bytes for large files read whole and kept read-only (a program's GML, 124 MB for
// resnet50): from 8 MiB up the bytes go into memory mapped and populated in one call instead of a
// zero-filled vector faulted in page by page (185 ms -> 90 ms for that GML on a 2-core KVM guest).
// The same checks and messages as read_file_bytes.
SharedBytes read_file_shared(const std::string& path, std::uint64_t max_bytes);

// A regular file of at most `max_bytes` open for reading, checked as read_file_bytes checks (and
// failing with its messages), for a reader that streams it instead of holding all of it first
// (protobuf parses a 100 MB model from the descriptor; read whole, it cost a 100 MB buffer to
// zero and fill before the parser copied it again). Bounding what it reads is the reader's job
// (the file may grow after the check).
class InputFile {
 public:
  InputFile(const std::string& path, std::uint64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  // Reads up to `n` bytes from the current offset into `out`: fewer only at the end of the file.
  // Errors name `path`.
  std::size_t read(std::uint8_t* out, std::size_t n, const std::string& path) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// Input echoed in a message is clipped, so a 100 000-character name or header cannot flood the
// terminal: "<first max characters>... (N characters)".
std::string clip(std::string_view text, std::size_t max = 80);

// Outputs of one command, written under temporary names beside their destinations and renamed
// into place by commit(). Destroying it without commit() removes the temporaries, so a failing
// command leaves no partial output (and keeps any older file at the destination untouched).
class PendingOutputs {
 public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;
  ~PendingOutputs();

  // Writes `bytes` to a temporary file for `path` (checked writable now: a missing directory or
  // a destination that is a directory fails here, before any work is wasted on later outputs).
  void write(const std::string& path, ByteSpan bytes);
  void write_text(const std::string& path, std::string_view text);
  // Renames every temporary to its destination, in the order written.
  void commit();

 private:
  struct Entry {
    std::string temp, final;
  };
  std::vector<Entry> entries_;
};

// An output directory built under a temporary name beside `final_dir` and moved into place by
// commit(): a new directory is renamed as a whole; into an existing one each entry is moved
// (replacing an entry of the same name). Without commit() the temporary tree is removed. Missing
// parent directories of `final_dir` are created; `final_dir` must not be a file.
class PendingDirectory {
 public:
  explicit PendingDirectory(const std::string& final_dir);
  PendingDirectory(const PendingDirectory&) = delete;
  PendingDirectory& operator=(const PendingDirectory&) = delete;
  ~PendingDirectory();
  const std::string& path() const { return temp_; }  // write the outputs here
  const std::string& final_path() const { return final_; }
  void commit();

 private:
  std::string temp_, final_;
  bool committed_ = false;
};

// One file, written through a temporary and renamed (a PendingOutputs of one); also declared in
// common/npy.h.
void write_file_bytes(const std::string& path, ByteSpan bytes);
void write_text_file(const std::string& path, std::string_view text);

// Fails with a message naming `option` when `path` cannot be an output file: it is a directory,
// or its directory does not exist. For checking every output before a long computation.
void check_output_path(const std::string& path, const std::string& option);

}  // namespace npukit
