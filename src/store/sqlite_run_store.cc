#include "store/sqlite_run_store.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include <unistd.h>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "plan/plan.h"
#include "store/record_json.h"

namespace codespace {
namespace {

// Several processes (the worker, a supervisor per run, the CLI) write the same file. A writer
// waits this long for another's transaction to finish before giving up with kUnavailable; every
// write transaction here is a handful of rows, so a wait this long means something is stuck.
constexpr int kBusyTimeoutMs = 10'000;
// Commits checkpoint the WAL into the database once it holds this many pages (see Configure).
constexpr int kWalCheckpointPages = 128;

// One step of the schema. Versions run 1, 2, 3, ... in order; a database's PRAGMA user_version is
// the last step applied to it. Never edit a step that has shipped: add the next one.
struct Migration {
  int version;
  const char* sql;
};

constexpr Migration kMigrations[] = {
    {1, R"sql(
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
-- List with a state filter, newest first; and without one.
CREATE INDEX runs_by_state_created ON runs (state, created_ms, id);
CREATE INDEX runs_by_created ON runs (created_ms, id);
)sql"},
    // What a filtered run's network did (NetworkReport), as JSON.
    {2, R"sql(
ALTER TABLE runs ADD COLUMN network_report_json TEXT NOT NULL DEFAULT '{}';
)sql"},
    // The start-up sweep finds a leftover namespace's run by its name.
    {3, R"sql(
CREATE INDEX runs_by_namespace ON runs (namespace);
)sql"},
    // Sealed logs: {"stdout": {"bytes", "sha256", "sealed"}, "stderr": {...}}.
    {4, R"sql(
ALTER TABLE runs ADD COLUMN logs_json TEXT NOT NULL DEFAULT '{}';
)sql"},
    // Sandbox and network setup in milliseconds, as the supervisor measured it; NULL when the
    // command never started, and for every run recorded before this step.
    {5, R"sql(
ALTER TABLE runs ADD COLUMN setup_ms INTEGER;
)sql"},
    // The host uid and gid a root worker's run ran as (leased, identity/); NULL otherwise.
    {6, R"sql(
ALTER TABLE runs ADD COLUMN host_uid INTEGER;
ALTER TABLE runs ADD COLUMN host_gid INTEGER;
)sql"},
    // The run's name (`--name`), and its submitter's idempotency key: NULL for none, so that the
    // UNIQUE index holds only the keys given (SQLite lets NULLs repeat under UNIQUE).
    {7, R"sql(
ALTER TABLE runs ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX runs_by_idempotency_key ON runs (idempotency_key);
CREATE INDEX runs_by_name ON runs (name, created_ms);
)sql"},
    // What a run used (issue 15): {"peak_memory_bytes", "cpu_user_usec", "cpu_system_usec",
    // "peak_pids", "oom_kills", "limit_kill"}; '{}' for runs without a cgroup and older runs.
    {8, R"sql(
ALTER TABLE runs ADD COLUMN usage_json TEXT NOT NULL DEFAULT '{}';
)sql"},
    // The syscall filter a run is launched under ("sha256:..."); '' for runs from before it.
    {9, R"sql(
ALTER TABLE runs ADD COLUMN seccomp TEXT NOT NULL DEFAULT '';
)sql"},
};

constexpr bool MigrationsAreInOrder() {
  int expected = 1;
  for (const Migration& migration : kMigrations) {
    if (migration.version != expected++) return false;
  }
  return true;
}
static_assert(MigrationsAreInOrder(), "kMigrations must be numbered 1, 2, 3, ... in order");

constexpr int kLatestSchemaVersion = static_cast<int>(std::size(kMigrations));

// Column order shared by INSERT, UPDATE (?1..?21) and SELECT (columns 0..20).
constexpr char kColumns[] =
    "id, spec_json, plan, network, namespace, state, exit_code, signal, reason, created_ms, "
    "started_ms, ended_ms, network_report_json, logs_json, setup_ms, host_uid, host_gid, name, "
    "idempotency_key, usage_json, seccomp";

constexpr char kInsertSql[] =
    "INSERT INTO runs (id, spec_json, plan, network, namespace, state, exit_code, signal, reason, "
    "created_ms, started_ms, ended_ms, network_report_json, logs_json, setup_ms, host_uid, "
    "host_gid, name, idempotency_key, usage_json, seccomp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
    "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)";

// Compare-and-set: only a row still in the expected state (?22) is replaced.
constexpr char kUpdateSql[] =
    "UPDATE runs SET spec_json = ?2, plan = ?3, network = ?4, namespace = ?5, state = ?6, "
    "exit_code = ?7, signal = ?8, reason = ?9, created_ms = ?10, started_ms = ?11, "
    "ended_ms = ?12, network_report_json = ?13, logs_json = ?14, setup_ms = ?15, host_uid = ?16, "
    "host_gid = ?17, name = ?18, idempotency_key = ?19, usage_json = ?20, seccomp = ?21 WHERE "
    "id = ?1 AND state = ?22";

Status BindOptionalInt(sqlite::Statement& stmt, int index, const std::optional<int>& value) {
  return value.has_value() ? stmt.BindInt64(index, *value) : stmt.BindNull(index);
}

// Binds ?1..?21 in kColumns order (?22 is Update's expected state).
Status BindRecord(sqlite::Statement& stmt, const RunRecord& record) {
  RETURN_IF_ERROR(stmt.BindText(1, record.id));
  RETURN_IF_ERROR(stmt.BindText(2, RunSpecToJson(record.spec)));
  RETURN_IF_ERROR(stmt.BindText(3, PlanName(record.plan)));
  RETURN_IF_ERROR(stmt.BindText(4, NetworkPostureName(record.network)));
  RETURN_IF_ERROR(stmt.BindText(5, record.namespace_name));
  RETURN_IF_ERROR(stmt.BindText(6, RunStateName(record.state)));
  RETURN_IF_ERROR(BindOptionalInt(stmt, 7, record.exit_code));
  RETURN_IF_ERROR(BindOptionalInt(stmt, 8, record.signal));
  RETURN_IF_ERROR(stmt.BindText(9, record.reason));
  RETURN_IF_ERROR(stmt.BindInt64(10, record.created_ms));
  RETURN_IF_ERROR(stmt.BindInt64(11, record.started_ms));
  RETURN_IF_ERROR(stmt.BindInt64(12, record.ended_ms));
  RETURN_IF_ERROR(stmt.BindText(13, NetworkReportToJson(record.network_report)));
  RETURN_IF_ERROR(stmt.BindText(14, LogsToJson(record.stdout_log, record.stderr_log)));
  RETURN_IF_ERROR(record.setup_ms ? stmt.BindInt64(15, *record.setup_ms) : stmt.BindNull(15));
  RETURN_IF_ERROR(record.host_uid ? stmt.BindInt64(16, *record.host_uid) : stmt.BindNull(16));
  RETURN_IF_ERROR(record.host_gid ? stmt.BindInt64(17, *record.host_gid) : stmt.BindNull(17));
  RETURN_IF_ERROR(stmt.BindText(18, record.name));
  RETURN_IF_ERROR(record.idempotency_key.empty() ? stmt.BindNull(19)
                                                 : stmt.BindText(19, record.idempotency_key));
  RETURN_IF_ERROR(stmt.BindText(20, record.usage.empty() ? "{}" : RunUsageToJson(record.usage)));
  RETURN_IF_ERROR(stmt.BindText(21, record.seccomp));
  return OkStatus();
}

// A stored value that does not parse means the file was edited or damaged: say which run and
// column, since the operator has to repair it by hand.
template <typename T>
Result<T> StoredValue(Result<T> parsed, std::string_view id, std::string_view column) {
  if (!parsed.ok()) {
    return InternalError(
        fmt::format("stored run \"{}\", column {}: {}", id, column, parsed.status().message()));
  }
  return parsed;
}

Result<std::optional<int>> StoredOptionalInt(const sqlite::Statement& row, int column,
                                             std::string_view id, std::string_view name) {
  if (row.ColumnIsNull(column)) return std::optional<int>();
  int64_t value = row.ColumnInt64(column);
  if (value < INT_MIN || value > INT_MAX) {
    return InternalError(
        fmt::format("stored run \"{}\", column {}: {} is out of range", id, name, value));
  }
  return std::optional<int>(static_cast<int>(value));
}

// Reads one row selected as kColumns.
Result<RunRecord> RecordFromRow(const sqlite::Statement& row) {
  RunRecord record;
  record.id = row.ColumnText(0);
  const std::string& id = record.id;
  ASSIGN_OR_RETURN(record.spec, StoredValue(RunSpecFromJson(row.ColumnText(1)), id, "spec_json"));
  ASSIGN_OR_RETURN(record.plan, StoredValue(ParsePlan(row.ColumnText(2)), id, "plan"));
  ASSIGN_OR_RETURN(record.network,
                   StoredValue(ParseNetworkPosture(row.ColumnText(3)), id, "network"));
  record.namespace_name = row.ColumnText(4);
  ASSIGN_OR_RETURN(record.state, StoredValue(ParseRunState(row.ColumnText(5)), id, "state"));
  ASSIGN_OR_RETURN(record.exit_code, StoredOptionalInt(row, 6, id, "exit_code"));
  ASSIGN_OR_RETURN(record.signal, StoredOptionalInt(row, 7, id, "signal"));
  record.reason = row.ColumnText(8);
  record.created_ms = row.ColumnInt64(9);
  record.started_ms = row.ColumnInt64(10);
  record.ended_ms = row.ColumnInt64(11);
  ASSIGN_OR_RETURN(record.network_report,
                   StoredValue(NetworkReportFromJson(row.ColumnText(12)), id, "network_report_json"));
  ASSIGN_OR_RETURN(auto logs, StoredValue(LogsFromJson(row.ColumnText(13)), id, "logs_json"));
  record.stdout_log = logs.first;
  record.stderr_log = logs.second;
  if (!row.ColumnIsNull(14)) record.setup_ms = row.ColumnInt64(14);
  if (!row.ColumnIsNull(15)) record.host_uid = row.ColumnInt64(15);
  if (!row.ColumnIsNull(16)) record.host_gid = row.ColumnInt64(16);
  record.name = row.ColumnText(17);
  if (!row.ColumnIsNull(18)) record.idempotency_key = row.ColumnText(18);
  ASSIGN_OR_RETURN(record.usage,
                   StoredValue(RunUsageFromJson(row.ColumnText(19)), id, "usage_json"));
  record.seccomp = row.ColumnText(20);
  return record;
}

Result<std::string> QueryText(sqlite3* db, std::string_view sql) {
  ASSIGN_OR_RETURN(sqlite::Statement stmt, sqlite::Statement::Prepare(db, sql));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return InternalError(fmt::format("{}: returned no row", sql));
  return stmt.ColumnText(0);
}

Result<int> ReadSchemaVersion(sqlite3* db) {
  ASSIGN_OR_RETURN(sqlite::Statement stmt, sqlite::Statement::Prepare(db, "PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return InternalError("PRAGMA user_version: returned no row");
  return static_cast<int>(stmt.ColumnInt64(0));
}

Status CheckSchemaKnown(int version) {
  if (version > kLatestSchemaVersion) {
    return FailedPreconditionError(fmt::format(
        "database schema version {} is newer than this codespace knows (latest {}); it was "
        "written by a newer codespace, which is needed to read it",
        version, kLatestSchemaVersion));
  }
  return OkStatus();
}

// Settings that hold per connection, so every process sets them on every open.
Status Configure(sqlite3* db) {
  // Set first: even the pragmas below may have to wait for another process's lock.
  int rc = sqlite3_busy_timeout(db, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return sqlite::SqliteError(db, "sqlite3_busy_timeout", rc);
  // WAL: the worker, supervisors and CLI read while one of them writes, without blocking it.
  // The mode is persistent in the file; asking again is cheap. It can be refused (a file system
  // without shared memory), and then the answer is not "wal": fail rather than run slower and
  // with readers blocking writers.
  // Asking for WAL takes a lock that the busy handler does not always wait for (SQLite answers
  // SQLITE_BUSY at once while another connection opens or recovers the WAL): read the mode first
  // (already WAL: nothing to take), and retry the switch for a while.
  ASSIGN_OR_RETURN(std::string mode, QueryText(db, "PRAGMA journal_mode"));
  for (int attempt = 0; mode != "wal"; ++attempt) {
    auto set = QueryText(db, "PRAGMA journal_mode=WAL");
    if (set.ok()) {
      mode = *set;
      break;
    }
    if (attempt >= 100 || set.status().code() != StatusCode::kUnavailable) return set.status();
    ::usleep(50000);
  }
  if (mode != "wal") {
    return FailedPreconditionError(
        fmt::format("PRAGMA journal_mode=WAL: the database stayed in mode \"{}\"", mode));
  }
  // FULL, not WAL's usual NORMAL: NORMAL can lose the last commits on power loss, and a run
  // record is what operators cannot lose — the only account of what an untrusted command did and
  // how it ended. A commit costs an fsync of the WAL; records are written a few times per run.
  RETURN_IF_ERROR(sqlite::Exec(db, "PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(sqlite::Exec(db, "PRAGMA foreign_keys=ON"));
  // Most connections are short (a CLI command, a supervisor). By default the last one to close
  // checkpoints the WAL into the database (an fsync of each) and deletes it, and the next open
  // creates it again (an fsync of the directory). Neither adds durability — every commit is
  // already fsynced in the WAL — so keep the WAL file and leave checkpoints to the automatic
  // ones that commits make every wal_autocheckpoint pages.
  int persist = 1;
  rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
  if (rc != SQLITE_OK) return sqlite::SqliteError(db, "SQLITE_FCNTL_PERSIST_WAL", rc);
  rc = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  if (rc != SQLITE_OK) return sqlite::SqliteError(db, "SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE", rc);
  // That threshold is lowered from 1000 pages because a persistent WAL has a price: the first
  // connection to open the database (every CLI command, every supervisor) rebuilds the WAL index
  // by reading and checksumming the whole WAL, ~2 ms for a full 1000-page WAL here, ~1 ms for an
  // average one. At 128 pages that read is a tenth of it, and the checkpoints it costs (a write
  // and fsync of the database every dozen runs or so) come to less than the difference.
  RETURN_IF_ERROR(
      sqlite::Exec(db, fmt::format("PRAGMA wal_autocheckpoint={}", kWalCheckpointPages)));
  return OkStatus();
}

// Brings the schema to kLatestSchemaVersion, one transaction per step. Safe against other
// processes migrating at the same time: each step re-reads the version under the write lock.
Status Migrate(sqlite3* db) {
  ASSIGN_OR_RETURN(int version, ReadSchemaVersion(db));
  RETURN_IF_ERROR(CheckSchemaKnown(version));
  for (const Migration& migration : kMigrations) {
    if (version >= migration.version) continue;
    sqlite::Transaction txn(db);
    RETURN_IF_ERROR(txn.BeginImmediate());
    ASSIGN_OR_RETURN(version, ReadSchemaVersion(db));
    RETURN_IF_ERROR(CheckSchemaKnown(version));
    if (version >= migration.version) continue;  // another process applied it; txn rolls back
    RETURN_IF_ERROR(
        sqlite::Exec(db, migration.sql, fmt::format("migration {}", migration.version)));
    // user_version lives in the database header and is part of the transaction: the step and the
    // version that records it commit together or not at all.
    RETURN_IF_ERROR(sqlite::Exec(db, fmt::format("PRAGMA user_version = {}", migration.version)));
    RETURN_IF_ERROR(txn.Commit());
    version = migration.version;
  }
  return OkStatus();
}

}  // namespace

int SqliteRunStore::LatestSchemaVersion() { return kLatestSchemaVersion; }

Result<std::unique_ptr<SqliteRunStore>> SqliteRunStore::Open(const std::string& db_path) {
  const std::string context = fmt::format("run store {}", db_path);
  sqlite3* raw = nullptr;
  // NOMUTEX: this class serialises calls on its connection itself (mu_).
  int rc =
      sqlite3_open_v2(db_path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  sqlite::UniqueDb db(raw);  // closed on every path, even when the open failed
  if (rc != SQLITE_OK) {
    return sqlite::SqliteError(raw, fmt::format("sqlite3_open_v2({})", db_path), rc);
  }
  sqlite3_extended_result_codes(db.get(), 1);
  Status status = Configure(db.get());
  if (status.ok()) status = Migrate(db.get());
  if (!status.ok()) return status.WithContext(context);
  return std::unique_ptr<SqliteRunStore>(new SqliteRunStore(db_path, std::move(db)));
}

Status SqliteRunStore::Insert(const RunRecord& record) {
  if (record.id.empty()) return InvalidArgumentError("run record has an empty id");
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(sqlite::Statement stmt, sqlite::Statement::Prepare(db_.get(), kInsertSql));
  RETURN_IF_ERROR(BindRecord(stmt, record));
  Result<bool> stepped = stmt.Step();
  if (!stepped.ok()) {
    if (stmt.ExtendedErrcode() == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("run \"{}\" already exists", record.id));
    }
    if (stmt.ExtendedErrcode() == SQLITE_CONSTRAINT_UNIQUE) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("idempotency key \"{}\" is another run's", record.idempotency_key));
    }
    return stepped.status();
  }
  return OkStatus();
}

Result<RunRecord> SqliteRunStore::Get(std::string_view id) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(sqlite::Statement stmt,
                   sqlite::Statement::Prepare(
                       db_.get(), fmt::format("SELECT {} FROM runs WHERE id = ?1", kColumns)));
  RETURN_IF_ERROR(stmt.BindText(1, id));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return NotFoundError(fmt::format("no run \"{}\"", id));
  return RecordFromRow(stmt);
}

Result<RunRecord> SqliteRunStore::FindOne(std::string_view column, std::string_view value) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(
      sqlite::Statement stmt,
      sqlite::Statement::Prepare(db_.get(), fmt::format("SELECT {} FROM runs WHERE {} = ?1 "
                                                        "ORDER BY created_ms DESC, id DESC LIMIT 1",
                                                        kColumns, column)));
  RETURN_IF_ERROR(stmt.BindText(1, value));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return NotFoundError(fmt::format("no run with {} \"{}\"", column, value));
  return RecordFromRow(stmt);
}

Result<RunRecord> SqliteRunStore::FindByIdempotencyKey(std::string_view key) {
  if (key.empty()) return NotFoundError("no idempotency key");
  return FindOne("idempotency_key", key);
}

Result<RunRecord> SqliteRunStore::FindByName(std::string_view name) {
  if (name.empty()) return NotFoundError("no name");
  return FindOne("name", name);
}

Result<RunRecord> SqliteRunStore::FindByNamespace(std::string_view namespace_name) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(sqlite::Statement stmt,
                   sqlite::Statement::Prepare(
                       db_.get(), fmt::format("SELECT {} FROM runs WHERE namespace = ?1 "
                                              "ORDER BY created_ms DESC LIMIT 1",
                                              kColumns)));
  RETURN_IF_ERROR(stmt.BindText(1, namespace_name));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return NotFoundError(fmt::format("no run with namespace \"{}\"", namespace_name));
  return RecordFromRow(stmt);
}

Result<std::vector<RunRecord>> SqliteRunStore::List(const RunListOptions& options) {
  // Ties on created_ms are broken by id so that pages never overlap or skip a run.
  const std::string sql =
      fmt::format("SELECT {} FROM runs {} ORDER BY created_ms DESC, id DESC LIMIT ?2 OFFSET ?3",
                  kColumns, options.state.has_value() ? "WHERE state = ?1" : "");
  constexpr size_t kMaxInt64 = static_cast<size_t>(INT64_MAX);
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(sqlite::Statement stmt, sqlite::Statement::Prepare(db_.get(), sql));
  if (options.state.has_value()) RETURN_IF_ERROR(stmt.BindText(1, RunStateName(*options.state)));
  RETURN_IF_ERROR(stmt.BindInt64(2, static_cast<int64_t>(std::min(options.limit, kMaxInt64))));
  RETURN_IF_ERROR(stmt.BindInt64(3, static_cast<int64_t>(std::min(options.offset, kMaxInt64))));
  std::vector<RunRecord> records;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    ASSIGN_OR_RETURN(RunRecord record, RecordFromRow(stmt));
    records.push_back(std::move(record));
  }
  return records;
}

Status SqliteRunStore::Update(const RunRecord& updated, RunState expected) {
  // Decided from values alone, before the database: a backward move is a caller's bug whatever
  // the stored state is.
  if (updated.state != expected && !IsAllowedTransition(expected, updated.state)) {
    return FailedPreconditionError(fmt::format("run {} cannot go from {} to {}", updated.id,
                                               RunStateName(expected),
                                               RunStateName(updated.state)));
  }
  std::lock_guard lock(mu_);
  sqlite::Transaction txn(db_.get());
  // IMMEDIATE: the compare-and-set and the read that explains a miss see the same database.
  RETURN_IF_ERROR(txn.BeginImmediate());
  {
    ASSIGN_OR_RETURN(sqlite::Statement stmt, sqlite::Statement::Prepare(db_.get(), kUpdateSql));
    RETURN_IF_ERROR(BindRecord(stmt, updated));
    RETURN_IF_ERROR(stmt.BindText(22, RunStateName(expected)));
    RETURN_IF_ERROR(stmt.Step());
  }
  if (sqlite3_changes(db_.get()) == 0) {
    // Nothing matched: either there is no such run, or another writer moved it first.
    ASSIGN_OR_RETURN(sqlite::Statement stmt,
                     sqlite::Statement::Prepare(db_.get(), "SELECT state FROM runs WHERE id = ?1"));
    RETURN_IF_ERROR(stmt.BindText(1, updated.id));
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) return NotFoundError(fmt::format("no run \"{}\"", updated.id));
    return AbortedError(fmt::format("run {} is {} now, not {}: another writer moved it first",
                                    updated.id, stmt.ColumnText(0), RunStateName(expected)));
  }
  return txn.Commit();
}

Status SqliteRunStore::DeleteEnded(std::string_view id) {
  std::lock_guard lock(mu_);
  {
    // The state is checked in the DELETE itself: a run claimed between a look and the delete is
    // never removed.
    ASSIGN_OR_RETURN(sqlite::Statement stmt,
                     sqlite::Statement::Prepare(
                         db_.get(), "DELETE FROM runs WHERE id = ?1 AND state NOT IN (?2, ?3)"));
    RETURN_IF_ERROR(stmt.BindText(1, id));
    RETURN_IF_ERROR(stmt.BindText(2, RunStateName(RunState::kQueued)));
    RETURN_IF_ERROR(stmt.BindText(3, RunStateName(RunState::kRunning)));
    RETURN_IF_ERROR(stmt.Step());
  }
  if (sqlite3_changes(db_.get()) > 0) return OkStatus();
  ASSIGN_OR_RETURN(sqlite::Statement stmt,
                   sqlite::Statement::Prepare(db_.get(), "SELECT state FROM runs WHERE id = ?1"));
  RETURN_IF_ERROR(stmt.BindText(1, id));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return NotFoundError(fmt::format("no run \"{}\"", id));
  return FailedPreconditionError(fmt::format(
      "run {} is {}: a run in flight is never removed (cancel it first)", id, stmt.ColumnText(0)));
}

}  // namespace codespace
