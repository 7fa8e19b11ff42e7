// Small RAII and Status helpers over the SQLite C API, for the store and its tests.
//
// Every error names the sqlite call (and the statement or path it was given) and sqlite's own
// text, e.g.
//   sqlite3_step(INSERT INTO runs ...): database is locked
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace codespace::sqlite {

struct DbCloser {
  // close_v2: if a statement somehow outlives the handle, the connection closes when it is
  // finalized instead of failing with SQLITE_BUSY and leaking.
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using UniqueDb = std::unique_ptr<sqlite3, DbCloser>;

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using UniqueStmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// The status code for a sqlite result code: contention is transient (kUnavailable: the caller may
// retry), a read-only or unwritable database is a permission problem, the rest is internal.
inline StatusCode CodeForSqlite(int rc) {
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return StatusCode::kUnavailable;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return StatusCode::kPermissionDenied;
    case SQLITE_CONSTRAINT:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

// SQL as it appears in an error message: whitespace collapsed, long statements cut short, so that
// the message stays one readable line.
inline std::string SqlForMessage(std::string_view sql) {
  constexpr size_t kMaxChars = 72;
  std::string out;
  bool space = false;
  for (char c : sql) {
    bool is_space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (is_space) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
    if (out.size() >= kMaxChars) return out + "...";
  }
  return out;
}

// "<call>: <sqlite3_errmsg>", falling back to sqlite3_errstr(rc) when there is no connection.
inline Status SqliteError(sqlite3* db, std::string_view call, int rc) {
  const char* text = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Status(CodeForSqlite(rc), fmt::format("{}: {}", call, text));
}

// Runs one or more statements that return no rows (schema, pragmas, BEGIN/COMMIT).
[[nodiscard]] inline Status Exec(sqlite3* db, std::string_view sql, std::string_view label = {}) {
  int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(
        db,
        fmt::format("sqlite3_exec({})", label.empty() ? SqlForMessage(sql) : std::string(label)),
        rc);
  }
  return OkStatus();
}

// A prepared statement, with its SQL kept for error messages.
class Statement {
 public:
  [[nodiscard]] static Result<Statement> Prepare(sqlite3* db, std::string_view sql) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    UniqueStmt stmt(raw);
    if (rc != SQLITE_OK)
      return SqliteError(db, fmt::format("sqlite3_prepare_v2({})", SqlForMessage(sql)), rc);
    return Statement(db, std::move(stmt), std::string(sql));
  }

  // Parameters are 1-based, as in SQL.
  [[nodiscard]] Status BindText(int index, std::string_view text) {
    return Check("sqlite3_bind_text",
                 sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_TRANSIENT,
                                     SQLITE_UTF8));
  }
  [[nodiscard]] Status BindInt64(int index, int64_t value) {
    return Check("sqlite3_bind_int64", sqlite3_bind_int64(stmt_.get(), index, value));
  }
  [[nodiscard]] Status BindNull(int index) {
    return Check("sqlite3_bind_null", sqlite3_bind_null(stmt_.get(), index));
  }

  // True when a row is ready to read, false when the statement is done.
  [[nodiscard]] Result<bool> Step() {
    int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, fmt::format("sqlite3_step({})", SqlForMessage(sql_)), rc);
  }
  // The extended result code of the last failed call, to tell e.g. a duplicate key apart.
  int ExtendedErrcode() const { return sqlite3_extended_errcode(db_); }

  bool ColumnIsNull(int column) const {
    return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
  }
  int64_t ColumnInt64(int column) const { return sqlite3_column_int64(stmt_.get(), column); }
  std::string ColumnText(int column) const {
    const unsigned char* text = sqlite3_column_text(stmt_.get(), column);
    int size = sqlite3_column_bytes(stmt_.get(), column);
    if (text == nullptr) return {};
    return std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(size));
  }

  const std::string& sql() const { return sql_; }

 private:
  Statement(sqlite3* db, UniqueStmt stmt, std::string sql)
      : db_(db), stmt_(std::move(stmt)), sql_(std::move(sql)) {}

  Status Check(std::string_view call, int rc) {
    if (rc == SQLITE_OK) return OkStatus();
    return SqliteError(db_, fmt::format("{}({})", call, SqlForMessage(sql_)), rc);
  }

  sqlite3* db_;
  UniqueStmt stmt_;
  std::string sql_;
};

// A transaction that rolls back unless committed. Begin with "BEGIN IMMEDIATE" for anything that
// writes: it takes the write lock up front (waiting through busy_timeout), where a deferred
// transaction that reads first and then writes can fail with SQLITE_BUSY without waiting.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (open_) Exec(db_, "ROLLBACK").IgnoreError();  // nothing more to do if even this fails
  }

  [[nodiscard]] Status BeginImmediate() {
    RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    open_ = true;
    return OkStatus();
  }
  [[nodiscard]] Status Commit() {
    RETURN_IF_ERROR(Exec(db_, "COMMIT"));
    open_ = false;
    return OkStatus();
  }

 private:
  sqlite3* db_;
  bool open_ = false;
};

}  // namespace codespace::sqlite
