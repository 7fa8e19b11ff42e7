#include "store/sqlite_run_store.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/file_util.h"
#include "base/testing/status_matchers.h"
#include "store/record_json.h"
#include "store/sqlite_util.h"
#include "store/test_records.h"

namespace codespace {
namespace {

using ::codespace::testing::FullRecord;
using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::string IdFor(int n) { return fmt::format("{:016x}", n); }

class SqliteRunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = GetEnv("TEST_TMPDIR", "/tmp");
    std::string pattern = base + "/store_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "mkdtemp(" << pattern << ")";
    dir_ = pattern;
    db_path_ = dir_ + "/runs.db";
  }
  void TearDown() override {
    if (!dir_.empty()) {
      EXPECT_OK(RemoveTree(dir_));
    }
  }

  std::unique_ptr<SqliteRunStore> OpenStore() {
    Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(db_path_);
    EXPECT_OK(store);
    return store.ok() ? std::move(*store) : nullptr;
  }

  // A record in `state`, created at `created_ms`.
  static RunRecord Record(const std::string& id, RunState state, int64_t created_ms) {
    Result<RunRecord> record = FullRecord(id);
    EXPECT_OK(record);
    RunRecord out = record.ok() ? *record : RunRecord{};
    out.id = id;
    out.state = state;
    out.exit_code = std::nullopt;
    out.created_ms = created_ms;
    out.started_ms = 0;
    out.ended_ms = 0;
    return out;
  }

  // Reads a pragma straight from the file, past the store.
  int64_t RawPragma(const std::string& pragma) {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_path_.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite::UniqueDb db(raw);
    Result<sqlite::Statement> stmt = sqlite::Statement::Prepare(db.get(), "PRAGMA " + pragma);
    EXPECT_OK(stmt);
    if (!stmt.ok()) return -1;
    Result<bool> row = stmt->Step();
    EXPECT_OK(row);
    return row.ok() && *row ? stmt->ColumnInt64(0) : -1;
  }

  void RawExec(const std::string& sql) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_path_.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    sqlite::UniqueDb db(raw);
    ASSERT_OK(sqlite::Exec(db.get(), sql));
  }

  static std::vector<std::string> Ids(const std::vector<RunRecord>& records) {
    std::vector<std::string> ids;
    for (const RunRecord& record : records) ids.push_back(record.id);
    return ids;
  }

  std::string dir_;
  std::string db_path_;
};

TEST_F(SqliteRunStoreTest, FreshDatabaseReachesLatestSchemaInWalMode) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_GE(SqliteRunStore::LatestSchemaVersion(), 1);
  EXPECT_EQ(RawPragma("user_version"), SqliteRunStore::LatestSchemaVersion());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db_path_.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite::UniqueDb db(raw);
  Result<sqlite::Statement> mode = sqlite::Statement::Prepare(db.get(), "PRAGMA journal_mode");
  ASSERT_OK(mode);
  Result<bool> row = mode->Step();
  ASSERT_OK(row);
  ASSERT_TRUE(*row);
  EXPECT_EQ(mode->ColumnText(0), "wal");
}

TEST_F(SqliteRunStoreTest, ReopenIsANoOp) {
  ASSERT_NE(OpenStore(), nullptr);
  ASSERT_OK(OpenStore()->Insert(Record(IdFor(1), RunState::kQueued, 10)));
  const int64_t schema_cookie = RawPragma("schema_version");  // bumped by any schema change
  for (int i = 0; i < 3; ++i) {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    EXPECT_OK(store->Get(IdFor(1)));
  }
  EXPECT_EQ(RawPragma("user_version"), SqliteRunStore::LatestSchemaVersion());
  EXPECT_EQ(RawPragma("schema_version"), schema_cookie);
}

TEST_F(SqliteRunStoreTest, RefusesDatabaseFromTheFuture) {
  ASSERT_NE(OpenStore(), nullptr);
  const int future = SqliteRunStore::LatestSchemaVersion() + 7;
  RawExec(fmt::format("PRAGMA user_version = {}", future));
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(db_path_);
  EXPECT_THAT(store, StatusIs(StatusCode::kFailedPrecondition));
  EXPECT_THAT(store, StatusHasMessage(fmt::format("schema version {} is newer", future)));
  EXPECT_THAT(store,
              StatusHasMessage(fmt::format("(latest {})", SqliteRunStore::LatestSchemaVersion())));
  EXPECT_THAT(store, StatusHasMessage(db_path_));
}

TEST_F(SqliteRunStoreTest, NotADatabaseIsAnErrorNamingThePath) {
  ASSERT_OK(WriteFileAtomically(db_path_, std::string(4096, 'x')));
  Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(db_path_);
  EXPECT_THAT(store, StatusHasMessage(db_path_));
  EXPECT_THAT(store, StatusHasMessage("file is not a database"));
}

TEST_F(SqliteRunStoreTest, MissingDirectoryIsAnError) {
  Result<std::unique_ptr<SqliteRunStore>> store =
      SqliteRunStore::Open(dir_ + "/no/such/dir/runs.db");
  EXPECT_THAT(store, StatusHasMessage("sqlite3_open_v2(" + dir_ + "/no/such/dir/runs.db)"));
}

TEST_F(SqliteRunStoreTest, FullRecordRoundTrips) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  ASSERT_OK(store->Insert(*record));
  Result<RunRecord> got = store->Get("0123456789abcdef");
  ASSERT_OK(got);
  EXPECT_EQ(*got, *record);

  record->id = "0123456789abcde0";
  record->exit_code = std::nullopt;
  record->signal = 15;
  record->host_uid = 600002;  // a root worker's run (migration 6)
  record->host_gid = 600002;
  ASSERT_OK(store->Insert(*record));
  got = store->Get(record->id);
  ASSERT_OK(got);
  EXPECT_EQ(*got, *record);
}

TEST_F(SqliteRunStoreTest, DuplicateIdIsAlreadyExists) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Insert(Record(IdFor(1), RunState::kQueued, 10)));
  Status again = store->Insert(Record(IdFor(1), RunState::kRunning, 20));
  EXPECT_THAT(again, StatusIs(StatusCode::kAlreadyExists));
  EXPECT_THAT(again, StatusHasMessage(fmt::format("run \"{}\" already exists", IdFor(1))));
  Result<RunRecord> got = store->Get(IdFor(1));
  ASSERT_OK(got);
  EXPECT_EQ(got->state, RunState::kQueued);
}

TEST_F(SqliteRunStoreTest, MissingRunIsNotFound) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<RunRecord> got = store->Get("nope");
  EXPECT_THAT(got, StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(got, StatusHasMessage("no run \"nope\""));
  EXPECT_THAT(store->Update(Record("nope", RunState::kRunning, 1), RunState::kQueued),
              StatusIs(StatusCode::kNotFound));
}

TEST_F(SqliteRunStoreTest, DeleteEndedRemovesOnlyRunsThatHaveEnded) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  int n = 0;
  for (RunState st : {RunState::kQueued, RunState::kRunning}) {
    ++n;
    ASSERT_OK(store->Insert(Record(IdFor(n), st, n)));
    Status s = store->DeleteEnded(IdFor(n));
    EXPECT_THAT(s, StatusIs(StatusCode::kFailedPrecondition)) << RunStateName(st);
    EXPECT_THAT(s, StatusHasMessage("never removed"));
    EXPECT_OK(store->Get(IdFor(n)));  // still there
  }
  for (RunState st : {RunState::kExited, RunState::kAborted, RunState::kRefused,
                      RunState::kCancelled, RunState::kLost}) {
    ++n;
    ASSERT_OK(store->Insert(Record(IdFor(n), st, n)));
    EXPECT_OK(store->DeleteEnded(IdFor(n))) << RunStateName(st);
    EXPECT_THAT(store->Get(IdFor(n)), StatusIs(StatusCode::kNotFound));
  }
  EXPECT_THAT(store->DeleteEnded("nope"), StatusIs(StatusCode::kNotFound));
}

TEST_F(SqliteRunStoreTest, UpdateFollowsTheStateMachine) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunRecord record = Record(IdFor(1), RunState::kQueued, 10);
  ASSERT_OK(store->Insert(record));

  record.state = RunState::kRunning;
  record.started_ms = 20;
  ASSERT_OK(store->Update(record, RunState::kQueued));

  // Same state: fields change, the state does not (e.g. the namespace is known now).
  record.namespace_name = "cs-000000000001";
  ASSERT_OK(store->Update(record, RunState::kRunning));

  record.state = RunState::kExited;
  record.exit_code = 0;
  record.ended_ms = 30;
  ASSERT_OK(store->Update(record, RunState::kRunning));

  // A terminal record may still be rewritten in its own state (e.g. its log sealed later).
  record.reason = "sealed";
  ASSERT_OK(store->Update(record, RunState::kExited));

  Result<RunRecord> got = store->Get(record.id);
  ASSERT_OK(got);
  EXPECT_EQ(*got, record);
}

TEST_F(SqliteRunStoreTest, NeverBackwards) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RunRecord record = Record(IdFor(1), RunState::kExited, 10);
  record.exit_code = 0;
  ASSERT_OK(store->Insert(record));

  for (RunState to :
       {RunState::kQueued, RunState::kRunning, RunState::kLost, RunState::kCancelled}) {
    RunRecord moved = record;
    moved.state = to;
    moved.reason = "should not land";
    Status status = store->Update(moved, RunState::kExited);
    EXPECT_THAT(status, StatusIs(StatusCode::kFailedPrecondition)) << RunStateName(to);
    EXPECT_THAT(status, StatusHasMessage(fmt::format("run {} cannot go from exited to {}",
                                                     record.id, RunStateName(to))));
  }
  RunRecord back = Record(IdFor(2), RunState::kRunning, 10);
  ASSERT_OK(store->Insert(back));
  back.state = RunState::kQueued;
  EXPECT_THAT(store->Update(back, RunState::kRunning), StatusIs(StatusCode::kFailedPrecondition));

  Result<RunRecord> got = store->Get(record.id);
  ASSERT_OK(got);
  EXPECT_EQ(*got, record);
  got = store->Get(IdFor(2));
  ASSERT_OK(got);
  EXPECT_EQ(got->state, RunState::kRunning);
}

TEST_F(SqliteRunStoreTest, CompareAndSetLosesTheRace) {
  auto first = OpenStore();
  auto second = OpenStore();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  RunRecord record = Record(IdFor(1), RunState::kQueued, 10);
  ASSERT_OK(first->Insert(record));

  // Both handles read "queued"; the first to write wins.
  Result<RunRecord> seen_by_second = second->Get(record.id);
  ASSERT_OK(seen_by_second);
  RunRecord started = record;
  started.state = RunState::kRunning;
  ASSERT_OK(first->Update(started, RunState::kQueued));

  RunRecord cancelled = *seen_by_second;
  cancelled.state = RunState::kCancelled;
  cancelled.reason = "cancelled by operator";
  Status lost = second->Update(cancelled, RunState::kQueued);
  EXPECT_THAT(lost, StatusIs(StatusCode::kAborted));
  EXPECT_THAT(lost, StatusHasMessage(fmt::format("run {} is running now, not queued", record.id)));

  Result<RunRecord> got = second->Get(record.id);
  ASSERT_OK(got);
  EXPECT_EQ(*got, started);

  // Re-read, retry from the state it is in: that works.
  cancelled.state = RunState::kCancelled;
  EXPECT_OK(second->Update(cancelled, RunState::kRunning));
}

TEST_F(SqliteRunStoreTest, ExactlyOneOfManyConcurrentStartsWins) {
  ASSERT_NE(OpenStore(), nullptr);
  ASSERT_OK(OpenStore()->Insert(Record(IdFor(1), RunState::kQueued, 10)));
  constexpr int kThreads = 8;
  std::atomic<int> won = 0;
  std::atomic<int> aborted = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(db_path_);
      ASSERT_OK(store);
      RunRecord record = Record(IdFor(1), RunState::kRunning, 10);
      record.reason = fmt::format("thread {}", t);
      Status status = (*store)->Update(record, RunState::kQueued);
      if (status.ok()) ++won;
      if (status.code() == StatusCode::kAborted) ++aborted;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(won, 1);
  EXPECT_EQ(aborted, kThreads - 1);
}

TEST_F(SqliteRunStoreTest, ListFiltersNewestFirstAndPages) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // created_ms ties (runs 4 and 5, 7 and 8) are broken by id, descending.
  const std::map<int, std::pair<RunState, int64_t>> kRuns = {
      {1, {RunState::kExited, 100}},  {2, {RunState::kRunning, 200}},
      {3, {RunState::kQueued, 300}},  {4, {RunState::kRunning, 400}},
      {5, {RunState::kRunning, 400}}, {6, {RunState::kRefused, 500}},
      {7, {RunState::kExited, 600}},  {8, {RunState::kRunning, 600}},
      {9, {RunState::kQueued, 50}},   {10, {RunState::kLost, 700}},
  };
  for (const auto& [n, state_and_time] : kRuns) {
    ASSERT_OK(store->Insert(Record(IdFor(n), state_and_time.first, state_and_time.second)));
  }
  const std::vector<std::string> kNewestFirst = {IdFor(10), IdFor(8), IdFor(7), IdFor(6), IdFor(5),
                                                 IdFor(4),  IdFor(3), IdFor(2), IdFor(1), IdFor(9)};

  Result<std::vector<RunRecord>> all = store->List({});
  ASSERT_OK(all);
  EXPECT_THAT(Ids(*all), ElementsAreArray(kNewestFirst));

  Result<std::vector<RunRecord>> running =
      store->List({.state = RunState::kRunning, .limit = 100, .offset = 0});
  ASSERT_OK(running);
  EXPECT_THAT(Ids(*running), ElementsAre(IdFor(8), IdFor(5), IdFor(4), IdFor(2)));
  for (const RunRecord& record : *running) EXPECT_EQ(record.state, RunState::kRunning);

  Result<std::vector<RunRecord>> cancelled =
      store->List({.state = RunState::kCancelled, .limit = 100, .offset = 0});
  ASSERT_OK(cancelled);
  EXPECT_THAT(*cancelled, IsEmpty());

  // Pages of 3 put together give the whole list, each run once.
  std::vector<std::string> paged;
  for (size_t offset = 0;; offset += 3) {
    Result<std::vector<RunRecord>> page =
        store->List({.state = std::nullopt, .limit = 3, .offset = offset});
    ASSERT_OK(page);
    EXPECT_LE(page->size(), 3u);
    if (page->empty()) break;
    for (const RunRecord& record : *page) paged.push_back(record.id);
  }
  EXPECT_THAT(paged, ElementsAreArray(kNewestFirst));

  Result<std::vector<RunRecord>> second_running =
      store->List({.state = RunState::kRunning, .limit = 2, .offset = 2});
  ASSERT_OK(second_running);
  EXPECT_THAT(Ids(*second_running), ElementsAre(IdFor(4), IdFor(2)));

  Result<std::vector<RunRecord>> past_the_end =
      store->List({.state = std::nullopt, .limit = 100, .offset = 100});
  ASSERT_OK(past_the_end);
  EXPECT_THAT(*past_the_end, IsEmpty());

  Result<std::vector<RunRecord>> huge =
      store->List({.state = std::nullopt, .limit = SIZE_MAX, .offset = 0});
  ASSERT_OK(huge);
  EXPECT_THAT(*huge, SizeIs(kRuns.size()));
}

TEST_F(SqliteRunStoreTest, ConcurrentInsertsFromManyHandlesLandExactlyOnce) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread opens its own handle, as separate processes would, all at once on a file
      // that does not exist yet: creation and migration race too.
      Result<std::unique_ptr<SqliteRunStore>> store = SqliteRunStore::Open(db_path_);
      if (!store.ok()) {
        ADD_FAILURE() << store.status().ToString();
        ++failures;
        return;
      }
      for (int i = 0; i < kPerThread; ++i) {
        int n = t * kPerThread + i;
        Status status = (*store)->Insert(Record(IdFor(n), RunState::kQueued, n));
        if (!status.ok()) {
          ADD_FAILURE() << status.ToString();
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<std::vector<RunRecord>> all =
      store->List({.state = std::nullopt, .limit = 10'000, .offset = 0});
  ASSERT_OK(all);
  ASSERT_THAT(*all, SizeIs(kThreads * kPerThread));
  std::set<std::string> ids;
  for (const RunRecord& record : *all) ids.insert(record.id);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kThreads * kPerThread));
  for (int n = 0; n < kThreads * kPerThread; ++n) EXPECT_TRUE(ids.contains(IdFor(n))) << n;
}

TEST_F(SqliteRunStoreTest, OneHandleSharedByThreads) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        EXPECT_OK(store->Insert(Record(IdFor(t * 100 + i), RunState::kQueued, i)));
        EXPECT_OK(store->List({.state = std::nullopt, .limit = 5, .offset = 0}));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Result<std::vector<RunRecord>> all =
      store->List({.state = std::nullopt, .limit = 1000, .offset = 0});
  ASSERT_OK(all);
  EXPECT_THAT(*all, SizeIs(80));
}

TEST_F(SqliteRunStoreTest, RecordsPersistAcrossCloseAndReopen) {
  Result<RunRecord> record = FullRecord("0123456789abcdef");
  ASSERT_OK(record);
  record->state = RunState::kRunning;
  record->exit_code = std::nullopt;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Insert(*record));
  }
  record->state = RunState::kLost;
  record->reason = "supervisor gone";
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Update(*record, RunState::kRunning));
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<RunRecord> got = store->Get(record->id);
  ASSERT_OK(got);
  EXPECT_EQ(*got, *record);
}

// Every process that opens the store first reads the whole WAL to rebuild its index, so the WAL
// must stay small however many short-lived connections write to it: checkpoints reset it long
// before SQLite's default of 1000 pages (~4 MB). 300 runs, each written as `codespace run` writes
// one: a connection that creates the record running and later ends it. (A checkpoint lets the
// WAL start over at a connection's next write; an index rebuilt on open forgets what was
// checkpointed, so that next write has to come from the same connection.)
TEST_F(SqliteRunStoreTest, WalStaysSmallAcrossManyShortConnections) {
  constexpr int64_t kPageFrame = 4096 + 24;  // a WAL frame: page and header
  int64_t largest = 0;
  for (int i = 0; i < 300; ++i) {
    RunRecord record = Record(IdFor(i), RunState::kRunning, 1000 + i);
    record.exit_code = std::nullopt;
    {
      auto store = OpenStore();
      ASSERT_NE(store, nullptr);
      ASSERT_OK(store->Insert(record));
      record.state = RunState::kExited;
      record.exit_code = 0;
      ASSERT_OK(store->Update(record, RunState::kRunning));
    }
    struct stat st {};
    ASSERT_EQ(::stat((db_path_ + "-wal").c_str(), &st), 0) << "the WAL is kept between opens";
    largest = std::max<int64_t>(largest, st.st_size);
  }
  EXPECT_LE(largest, 160 * kPageFrame) << "the WAL grew to " << largest / kPageFrame << " frames";
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto all = store->List({.state = std::nullopt, .limit = 1000, .offset = 0});
  ASSERT_OK(all);
  EXPECT_THAT(*all, SizeIs(300));
}

// A database as codespace left it at schema version 4 (before setup times), with rows in it:
// opening migrates it to the latest version, keeps every row as it was (no setup time), and the
// new column then takes setup times.
TEST_F(SqliteRunStoreTest, MigratesAVersion4DatabaseKeepingItsRows) {
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open_v2(db_path_.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                              nullptr),
              SQLITE_OK);
    sqlite::UniqueDb created(raw);
  }
  RawExec(R"sql(
CREATE TABLE runs (
  id TEXT PRIMARY KEY NOT NULL,
  spec_json TEXT NOT NULL,
  plan TEXT NOT NULL,
  network TEXT NOT NULL,
  namespace TEXT NOT NULL,
  state TEXT NOT NULL,
  exit_code INTEGER,
  signal INTEGER,
  reason TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL
);
CREATE INDEX runs_by_state_created ON runs (state, created_ms, id);
CREATE INDEX runs_by_created ON runs (created_ms, id);
ALTER TABLE runs ADD COLUMN network_report_json TEXT NOT NULL DEFAULT '{}';
CREATE INDEX runs_by_namespace ON runs (namespace);
ALTER TABLE runs ADD COLUMN logs_json TEXT NOT NULL DEFAULT '{}';
PRAGMA user_version = 4;
)sql");
  Result<RunRecord> exited = FullRecord(IdFor(1));
  ASSERT_OK(exited);
  exited->setup_ms = std::nullopt;  // version 4 had nowhere to keep one
  exited->seccomp.clear();           // nor a filter's name (version 6)
  exited->network_report.dropped_packets = 3;
  exited->stdout_log = {12, "ab12", true};
  RunRecord running = Record(IdFor(2), RunState::kRunning, 20);
  running.setup_ms = std::nullopt;
  running.seccomp.clear();
  running.started_ms = 21;
  for (const RunRecord* r : {&*exited, &running}) {
    RawExec(fmt::format(
        "INSERT INTO runs (id, spec_json, plan, network, namespace, state, exit_code, signal, "
        "reason, created_ms, started_ms, ended_ms, network_report_json, logs_json) VALUES "
        "('{}', '{}', '{}', '{}', '{}', '{}', {}, NULL, '{}', {}, {}, {}, '{}', '{}')",
        r->id, RunSpecToJson(r->spec), PlanName(r->plan), NetworkPostureName(r->network),
        r->namespace_name, RunStateName(r->state),
        r->exit_code ? std::to_string(*r->exit_code) : "NULL", r->reason, r->created_ms,
        r->started_ms, r->ended_ms, NetworkReportToJson(r->network_report),
        LogsToJson(r->stdout_log, r->stderr_log)));
  }
  ASSERT_EQ(RawPragma("user_version"), 4);

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawPragma("user_version"), SqliteRunStore::LatestSchemaVersion());
  EXPECT_EQ(SqliteRunStore::LatestSchemaVersion(), 9);
  Result<RunRecord> got = store->Get(IdFor(1));
  ASSERT_OK(got);
  EXPECT_EQ(*got, *exited);
  EXPECT_EQ(got->setup_ms, std::nullopt);
  got = store->Get(IdFor(2));
  ASSERT_OK(got);
  EXPECT_EQ(*got, running);

  // The migrated row takes a setup time when its run ends; a new row keeps its own.
  RunRecord ended = running;
  ended.state = RunState::kExited;
  ended.exit_code = 0;
  ended.setup_ms = 29;
  ended.ended_ms = 40;
  ASSERT_OK(store->Update(ended, RunState::kRunning));
  Result<RunRecord> fresh = FullRecord(IdFor(3));
  ASSERT_OK(fresh);
  ASSERT_OK(store->Insert(*fresh));
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  got = store->Get(IdFor(2));
  ASSERT_OK(got);
  EXPECT_EQ(got->setup_ms, 29);
  EXPECT_EQ(*got, ended);
  got = store->Get(IdFor(3));
  ASSERT_OK(got);
  EXPECT_EQ(got->setup_ms, 41);
  EXPECT_EQ(store->Get(IdFor(1))->setup_ms, std::nullopt);
}

TEST_F(SqliteRunStoreTest, DamagedRowIsAnErrorNamingRunAndColumn) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Insert(Record(IdFor(1), RunState::kQueued, 10)));
  }
  RawExec(fmt::format("UPDATE runs SET state = 'finished' WHERE id = '{}'", IdFor(1)));
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  Result<RunRecord> got = store->Get(IdFor(1));
  EXPECT_THAT(got, StatusIs(StatusCode::kInternal));
  EXPECT_THAT(got, StatusHasMessage(fmt::format("stored run \"{}\", column state", IdFor(1))));
}

}  // namespace
}  // namespace codespace
