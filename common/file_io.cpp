#include "common/file_io.h"

#include "common/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace npukit {
namespace {

namespace fs = std::filesystem;

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string human_bytes(std::uint64_t n) {
  if (n >= (std::uint64_t{1} << 30) && n % (std::uint64_t{1} << 30) == 0)
    return fmt::format("{} GiB", n >> 30);
  if (n >= (std::uint64_t{1} << 20) && n % (std::uint64_t{1} << 20) == 0)
    return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} bytes", n);
}

// Closes a descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const std::string& path, const std::uint8_t* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("{}: write error: {}", path, std::strerror(errno));
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

std::string temp_name_for(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const fs::path p(path);
  const std::string name =
      fmt::format(".{}.npukit-tmp-{}-{}", p.filename().string(), ::getpid(), counter.fetch_add(1));
  return (p.parent_path() / name).string();
}

}  // namespace

InputFile::InputFile(const std::string& path, std::uint64_t max_bytes) {
  // Open without blocking (a FIFO would wait for a writer), then decide from the open file.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    if (errno == ENOENT) fail("{}: cannot open: no such file", path);
    fail("{}: cannot open file for reading: {}", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("{}: is {}, expected a regular file", path, kind_of(st.st_mode));
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > max_bytes)
    fail("{}: file is {} bytes, more than the {} limit for this input", path, size_,
         human_bytes(max_bytes));
  ::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  std::swap(fd_, f.fd);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t InputFile::read(std::uint8_t* out, std::size_t n, const std::string& path) const {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd_, out + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("{}: read error: {}", path, std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return got;
}

namespace {

// All of `f` (open and checked, read from its start) into a vector.
Bytes read_whole(const InputFile& f, const std::string& path, std::uint64_t max_bytes) {
  Bytes bytes(static_cast<std::size_t>(f.size()));
  std::size_t got = f.read(bytes.data(), bytes.size(), path);
  // The file may have grown since fstat: read on, still bounded. A probe first, so the usual
  // file read whole is not copied into a bigger buffer only to find nothing more.
  std::uint8_t probe[4096];
  for (std::size_t more; got == bytes.size() && (more = f.read(probe, sizeof probe, path)) > 0;) {
    if (got + more > max_bytes)
      fail("{}: file is more than the {} limit for this input", path, human_bytes(max_bytes));
    bytes.insert(bytes.end(), probe, probe + more);
    got += more;
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace

Bytes read_file_bytes(const std::string& path, std::uint64_t max_bytes) {
  return read_whole(InputFile(path, max_bytes), path, max_bytes);
}

SharedBytes read_file_shared(const std::string& path, std::uint64_t max_bytes) {
  constexpr std::uint64_t kMapFrom = std::uint64_t{8} << 20;
  const InputFile f(path, max_bytes);
  const std::size_t size = static_cast<std::size_t>(f.size());
  void* memory = size >= kMapFrom ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0)
                                  : MAP_FAILED;
  if (memory == MAP_FAILED) return read_whole(f, path, max_bytes);
  std::shared_ptr<const void> owner(
      memory, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  auto* bytes = static_cast<std::uint8_t*>(memory);
  const std::size_t got = f.read(bytes, size, path);
  // Grown since fstat (rare): read_file_bytes reads it again, on to its end and bounded.
  std::uint8_t probe;
  if (got == size && f.read(&probe, 1, path) == 1) return read_file_bytes(path, max_bytes);
  return SharedBytes(std::move(owner), bytes, got);
}

Bytes read_file_bytes(const std::string& path) {
  return read_file_bytes(path, kMaxBinaryFileBytes);
}

std::string clip(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, max), text.size());
}

std::string read_text_file(const std::string& path, std::uint64_t max_bytes) {
  const Bytes b = read_file_bytes(path, max_bytes);
  return std::string(b.begin(), b.end());
}

void check_output_path(const std::string& path, const std::string& option) {
  if (path.empty()) fail("{}: the output path is empty", option);
  std::error_code ec;
  if (fs::is_directory(path, ec))
    fail("{} '{}': is a directory, expected a file name", option, path);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    fail("{} '{}': directory '{}' does not exist", option, path, parent.string());
}

PendingOutputs::~PendingOutputs() {
  for (const auto& e : entries_) ::unlink(e.temp.c_str());
}

void PendingOutputs::write(const std::string& path, ByteSpan bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail("{}: is a directory, cannot write a file there", path);
    // A device or FIFO (/dev/null, /dev/stdout) is written as is: it cannot be replaced.
    Fd f{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
    if (f.fd < 0) fail("{}: cannot open for writing: {}", path, std::strerror(errno));
    write_all(f.fd, path, bytes.data(), bytes.size());
    return;
  }
  Entry e{temp_name_for(path), path};
  Fd f{::open(e.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)};
  if (f.fd < 0) fail("{}: cannot open file for writing: {}", path, std::strerror(errno));
  entries_.push_back(e);  // from here on the destructor removes it
  write_all(f.fd, path, bytes.data(), bytes.size());
  const int fd = f.fd;
  f.fd = -1;
  if (::close(fd) != 0) fail("{}: write error (disk full?): {}", path, std::strerror(errno));
}

void PendingOutputs::write_text(const std::string& path, std::string_view text) {
  write(path, ByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void PendingOutputs::commit() {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (std::rename(entries_[i].temp.c_str(), entries_[i].final.c_str()) != 0) {
      const std::string reason = std::strerror(errno);
      entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(i));
      fail("{}: cannot move the finished output into place: {}", entries_.front().final, reason);
    }
  }
  entries_.clear();
}

PendingDirectory::PendingDirectory(const std::string& final_dir) : final_(final_dir) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
  if (final_.empty()) fail("the output directory name is empty");
  std::error_code ec;
  const fs::path final_path(final_);
  if (fs::exists(final_path, ec) && !fs::is_directory(final_path, ec))
    fail("{}: exists and is not a directory; give a directory for the outputs", final_dir);
  const fs::path parent = final_path.parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) fail("cannot create directory '{}': {}", parent.string(), ec.message());
  }
  temp_ = temp_name_for(final_);
  fs::create_directory(temp_, ec);
  if (ec) fail("cannot create a directory beside '{}': {}", final_dir, ec.message());
}

PendingDirectory::~PendingDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void PendingDirectory::commit() {
  std::error_code ec;
  if (!fs::exists(final_, ec)) {
    fs::rename(temp_, final_, ec);
    if (ec) fail("{}: cannot move the finished outputs into place: {}", final_, ec.message());
  } else {
    for (const auto& entry : fs::directory_iterator(temp_)) {
      const fs::path dest = fs::path(final_) / entry.path().filename();
      if (fs::is_directory(dest, ec) && !fs::is_symlink(dest, ec)) fs::remove_all(dest, ec);
      fs::rename(entry.path(), dest, ec);
      if (ec)
        fail("{}: cannot move the finished output into place: {}", dest.string(), ec.message());
    }
    fs::remove_all(temp_, ec);
  }
  committed_ = true;
}

void write_file_bytes(const std::string& path, ByteSpan bytes) {
  PendingOutputs out;
  out.write(path, bytes);
  out.commit();
}

void write_text_file(const std::string& path, std::string_view text) {
  PendingOutputs out;
  out.write_text(path, text);
  out.commit();
}

}  // namespace npukit
