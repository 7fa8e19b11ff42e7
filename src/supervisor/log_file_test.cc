#include "supervisor/log_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::testing::HasSubstr;

// Bytes that no two offsets share a pattern of (a misplaced chunk changes the digest).
std::string Noise(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

size_t ThreadsOfThisProcess() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// Seals `sink`: its digest, and the file at `path`, are of exactly `expected`.
void ExpectSealsAs(FileLogSink& sink, const std::string& path, std::string_view expected) {
  auto d = sink.Seal();
  ASSERT_OK(d);
  EXPECT_EQ(d->bytes, expected.size());
  EXPECT_EQ(d->sha256, Sha256Hex(expected));
  EXPECT_EQ(*Sha256OfFile(path), d->sha256);
}

TEST(FileLogSinkTest, DigestIsOfExactlyTheBytesWrittenAndTheFileIsSealed) {
  TempDir dir;
  std::string path = dir.path() + "/stdout";
  auto sink = FileLogSink::Create(path);
  ASSERT_OK(sink);
  std::string all;
  for (int i = 0; i < 1000; ++i) {
    std::string chunk = "line " + std::to_string(i) + "\n";
    ASSERT_OK((*sink)->Write(chunk.data(), chunk.size()));
    all += chunk;
  }
  auto d = (*sink)->Seal();
  ASSERT_OK(d);
  EXPECT_TRUE(d->sealed);
  EXPECT_EQ(d->bytes, all.size());
  EXPECT_EQ(d->sha256, Sha256Hex(all));
  EXPECT_EQ(*Sha256OfFile(path), d->sha256);
  EXPECT_EQ(*ReadFileToString(path), all);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0222, 0u) << "a sealed log is read-only";
  EXPECT_FALSE((*sink)->Write("x", 1).ok());
  EXPECT_FALSE((*sink)->Seal().ok());
}

TEST(FileLogSinkTest, EmptyLogSealsWithTheEmptyDigest) {
  TempDir dir;
  auto sink = FileLogSink::Create(dir.path() + "/stderr");
  ASSERT_OK(sink);
  auto d = (*sink)->Seal();
  ASSERT_OK(d);
  EXPECT_EQ(d->bytes, 0u);
  EXPECT_EQ(d->sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

struct QueueCase {
  size_t chunk_bytes;
  size_t max_chunks;
  uint64_t hash_inline_first;
  uint64_t writeback_every;
};

std::string Describe(const QueueCase& c) {
  return fmt::format("chunk {} x{}, inline {}, writeback {}", c.chunk_bytes, c.max_chunks,
                     c.hash_inline_first, c.writeback_every);
}

FileLogSink::Options OptionsFor(const QueueCase& c) {
  FileLogSink::Options o;
  o.chunk_bytes = c.chunk_bytes;
  o.max_chunks = c.max_chunks;
  o.hash_inline_first = c.hash_inline_first;
  o.writeback_every = c.writeback_every;
  return o;
}

// Inline, on the hashing thread, and switching from one to the other mid-stream; chunks that
// split the writes every which way, queues from one chunk deep: the digest and the file are
// exactly the bytes written, in order.
const QueueCase kQueueCases[] = {
    {1, 1, 0, 0},                     // a byte at a time, the writer never ahead
    {7, 2, 0, 4096},                  //
    {4096, 1, 0, 0},                  //
    {4096, 16, 5000, 8192},           // starts inline, switches mid-stream
    {65536, 2, 100000, 1 << 20},      //
    {262144, 16, 1 << 20, 8 << 20},   //
    {1 << 20, 4, 1 << 20, 8 << 20},   // the defaults
    {1 << 22, 3, 0, 1},               // chunks larger than any write
    {4096, 4, uint64_t{1} << 40, 0},  // all inline
};

TEST(FileLogSinkTest, DigestIsRightInlineAndOnTheHashingThread) {
  const std::string all = Noise(3 * 1024 * 1024 + 17, 1);
  for (const QueueCase& c : kQueueCases) {
    SCOPED_TRACE(Describe(c));
    TempDir dir;
    std::string path = dir.path() + "/stdout";
    auto sink = FileLogSink::Create(path, OptionsFor(c));
    ASSERT_OK(sink);
    // Pieces of every size from 0 up, smaller and larger than a chunk (tiny chunks get fewer
    // bytes: a million one-byte writes tell nothing more).
    std::mt19937 rng(static_cast<unsigned>(c.chunk_bytes));
    const size_t total = c.chunk_bytes < 4096 ? 9001 : all.size();
    const size_t span = std::min<size_t>(3 * c.chunk_bytes + 2, 1 << 20);
    size_t at = 0;
    while (at < total) {
      size_t piece = std::min(total - at, static_cast<size_t>(rng() % span));
      ASSERT_OK((*sink)->Write(all.data() + at, piece));
      at += piece;
    }
    EXPECT_LE((*sink)->chunks_allocated(), c.max_chunks);
    ExpectSealsAs(**sink, path, std::string_view(all).substr(0, total));
  }
}

// The launcher's way in: the sink reads the (non-blocking) pipe itself, to its end.
TEST(FileLogSinkTest, PullFromTakesAPipeToItsEnd) {
  for (const QueueCase& c : kQueueCases) {
    if (c.chunk_bytes < 4096) continue;
    SCOPED_TRACE(Describe(c));
    TempDir dir;
    std::string path = dir.path() + "/stdout";
    auto sink = FileLogSink::Create(path, OptionsFor(c));
    ASSERT_OK(sink);
    auto pipe = MakePipe();
    ASSERT_OK(pipe);
    ASSERT_EQ(::fcntl(pipe->read.get(), F_SETFL, O_NONBLOCK), 0);
    const std::string all = Noise(5 * 1024 * 1024 + 3, 2);
    std::thread writer([&, w = std::move(pipe->write)] {
      std::mt19937 rng(3);
      for (size_t at = 0; at < all.size();) {
        size_t piece = std::min<size_t>(all.size() - at, rng() % 200000);
        ASSERT_OK(WriteAll(w.get(), all.data() + at, piece));
        at += piece;
      }
    });
    uint64_t pulled = 0;
    for (;;) {
      pollfd p{pipe->read.get(), POLLIN, 0};
      ASSERT_GE(::poll(&p, 1, -1), 0);
      auto r = (*sink)->PullFrom(pipe->read.get());
      ASSERT_OK(r);
      pulled += r->bytes;
      if (r->end) break;
    }
    writer.join();
    EXPECT_EQ(pulled, all.size());
    ExpectSealsAs(**sink, path, all);
  }
}

// A failed write (here the file-size limit; disk full takes the same path) is an error that
// names the call, the file and errno; the digest covers exactly what reached the file, the
// short write before the failure included.
TEST(FileLogSinkTest, AFailedWriteSurfacesAndTheDigestCoversWhatReachedTheFile) {
  for (uint64_t inline_first : {uint64_t{0}, uint64_t{1} << 20}) {
    SCOPED_TRACE(::testing::Message() << "inline " << inline_first);
    TempDir dir;
    std::string path = dir.path() + "/stdout";
    FileLogSink::Options o;
    o.chunk_bytes = 65536;
    o.hash_inline_first = inline_first;
    auto sink = FileLogSink::Create(path, o);
    ASSERT_OK(sink);
    const std::string all = Noise(300000, 4);
    constexpr rlim_t kLimit = 250000;
    rlimit old;
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    rlimit limited = old;
    limited.rlim_cur = kLimit;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limited), 0);
    Status first = (*sink)->Write(all.data(), 100000);
    Status second = (*sink)->Write(all.data() + 100000, 100000);
    Status third = (*sink)->Write(all.data() + 200000, 100000);  // 50000 fit
    auto pipe = MakePipe(O_NONBLOCK);
    ASSERT_OK(pipe);
    ASSERT_OK(WriteAll(pipe->write.get(), "more"));
    auto pulled = (*sink)->PullFrom(pipe->read.get());
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    EXPECT_OK(first);
    EXPECT_OK(second);
    EXPECT_THAT(third, StatusHasMessage("write(" + path + "): File too large"));
    EXPECT_THAT(pulled, StatusHasMessage("write(" + path + "): File too large"));
    ExpectSealsAs(**sink, path, std::string_view(all).substr(0, kLimit));
  }
}

// Memory is bounded: while the hashing thread is held up, the writer gets max_chunks chunks and
// then waits (and the pipe fills, and the sandbox's writer blocks). Nothing is dropped; it goes
// on once the hashing does.
TEST(FileLogSinkTest, TheHashingQueueIsBoundedAndTheWriterWaitsForIt) {
  TempDir dir;
  std::mutex mu;
  std::condition_variable cv;
  bool hashing_held = false, released = false;
  FileLogSink::Options o;
  o.chunk_bytes = 4096;
  o.max_chunks = 2;
  o.hash_inline_first = 0;
  o.before_hash = [&] {
    std::unique_lock lock(mu);
    hashing_held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  };
  auto sink = FileLogSink::Create(dir.path() + "/stdout", o);
  ASSERT_OK(sink);
  const std::string all = Noise(10 * 4096, 5);
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < 10; ++i) {
      ASSERT_OK((*sink)->Write(all.data() + i * 4096, 4096));
      written.fetch_add(1);
    }
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return hashing_held; });
  }
  // One chunk is being hashed, one is queued: a third Write gets none. (A wait for what must
  // not happen: it cannot fail spuriously, only miss a bug on a very slow machine.)
  for (int i = 0; i < 200 && written.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(written.load(), 2);
  EXPECT_EQ((*sink)->chunks_allocated(), 2u);
  {
    std::lock_guard lock(mu);
    released = true;
  }
  cv.notify_all();
  writer.join();
  EXPECT_EQ(written.load(), 10);
  EXPECT_EQ((*sink)->chunks_allocated(), 2u);
  auto d = (*sink)->Seal();
  ASSERT_OK(d);
  EXPECT_EQ(d->sha256, Sha256Hex(all));
}

// A log that stays small is hashed as it is written: no thread. A big one gets the hashing
// thread, which the seal ends.
TEST(FileLogSinkTest, OnlyABigLogStartsTheHashingThread) {
  TempDir dir;
  const size_t before = ThreadsOfThisProcess();
  auto quiet = FileLogSink::Create(dir.path() + "/stderr");
  ASSERT_OK(quiet);
  ASSERT_OK((*quiet)->Write("a warning\n", 10));
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  auto loud = FileLogSink::Create(dir.path() + "/stdout");
  ASSERT_OK(loud);
  const std::string all = Noise(3 * 1024 * 1024, 6);
  ASSERT_OK((*loud)->Write(all.data(), all.size()));
  EXPECT_EQ(ThreadsOfThisProcess(), before + 1);
  auto d = (*loud)->Seal();
  ASSERT_OK(d);
  EXPECT_EQ(d->sha256, Sha256Hex(all));
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  EXPECT_OK((*quiet)->Seal());
}

}  // namespace
}  // namespace codespace
