// SqliteRunStore: the default RunStore, an embedded SQLite database on the worker's disk.
//
// Several processes open the same file at once — the worker, one supervisor per run, the CLI —
// each with its own SqliteRunStore. The database runs in WAL mode (readers never block the one
// writer), with synchronous=FULL (a committed record survives power loss) and a busy timeout
// (a writer waits for another rather than failing at once). Writes that must see and change a
// record atomically (Update) run in one BEGIN IMMEDIATE transaction.
//
// The schema is versioned by PRAGMA user_version and brought up to date by an ordered list of
// migrations, each applied in its own transaction, when the store is opened. A database written
// by a newer codespace (a version above the latest this code knows) is refused rather than
// misread.
//
// One SqliteRunStore may be shared by threads: calls on it are serialised.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/run_record.h"
#include "store/run_store.h"
#include "store/sqlite_util.h"

namespace codespace {

class SqliteRunStore : public RunStore {
 public:
  // Opens (creating when missing) the database at `db_path` and migrates it to the latest schema.
  // Errors name the path and the failing sqlite call; kFailedPrecondition for a database whose
  // schema is newer than this code.
  [[nodiscard]] static Result<std::unique_ptr<SqliteRunStore>> Open(const std::string& db_path);

  // The schema version a freshly migrated database has (its PRAGMA user_version).
  static int LatestSchemaVersion();

  [[nodiscard]] Status Insert(const RunRecord& record) override;
  [[nodiscard]] Result<RunRecord> Get(std::string_view id) override;
  [[nodiscard]] Result<RunRecord> FindByNamespace(std::string_view namespace_name) override;
  [[nodiscard]] Result<std::vector<RunRecord>> List(const RunListOptions& options) override;
  [[nodiscard]] Status Update(const RunRecord& updated, RunState expected) override;
  [[nodiscard]] Status DeleteEnded(std::string_view id) override;
  [[nodiscard]] Result<RunRecord> FindByIdempotencyKey(std::string_view key) override;
  [[nodiscard]] Result<RunRecord> FindByName(std::string_view name) override;

  const std::string& path() const { return path_; }

 private:
  // The newest run whose `column` (a fixed column name, never input) is `value`.
  Result<RunRecord> FindOne(std::string_view column, std::string_view value);
  SqliteRunStore(std::string path, sqlite::UniqueDb db)
      : path_(std::move(path)), db_(std::move(db)) {}

  std::string path_;
  std::mutex mu_;  // one connection: a transaction must not interleave with another thread's
  sqlite::UniqueDb db_;
};

}  // namespace codespace
