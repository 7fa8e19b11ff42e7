// The worker's configuration FILE (/etc/codespace/worker.toml): a pure reader that turns TOML
// text into a flat list of (setting, value text, source) entries, checked against a table of
// known settings the caller passes in. It never reads the environment or the file system itself
// (ReadConfigFile is the one thin wrapper that reads a path), so every rule is table-tested.
//
// Precedence: an environment variable beats the file, the file beats the built-in default.
// Unknown keys and wrongly typed values are errors naming the key, the file and the line: a
// worker refuses to start on a bad file rather than run with a setting it silently ignored.
//
// How it plugs into the project today (src/cli/main.cc, the worker's start): the entries that
// no environment variable overrides are exported into the worker's own environment with
// EnvironmentAssignments before anything reads a setting, so every existing reader
// (GetEnv("CODESPACE_...")) sees the file's value without being changed.
//
// How it plugs into a Config value (src/config/config.h, one list of settings each with a
// default, an env var and a source): build the ConfigKey table from that list — name, type and
// env var of each setting — call ReadConfigFile(path, keys), then for each entry whose setting's
// env var is unset, set the setting's value from `value_text` and its source from `source`
// ("file:/etc/codespace/worker.toml:12"). OverlayEnvironment does exactly that precedence on
// entries, if the Config wants the merged list rather than doing it itself.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

enum class ConfigType {
  kString,   // any TOML string
  kPath,     // a TOML string holding an absolute path
  kInteger,  // a TOML integer >= 0 (milliseconds, seconds, counts)
  kBoolean,  // a TOML boolean; its value text is "1" or "0", as the env vars take it
};
std::string_view ConfigTypeName(ConfigType type);

// One setting the file may hold. `name` is its TOML key, dotted for a key inside a table
// ("api.socket" is `[api] socket = ...`); the worker's settings use flat names.
struct ConfigKey {
  std::string name;
  ConfigType type = ConfigType::kString;
  std::string env;  // the environment variable that overrides it, e.g. "CODESPACE_API_SOCKET"
};

// One setting as read: its value as text (what the env var would hold) and where it came from:
// "file:/etc/codespace/worker.toml:12", or "env:CODESPACE_API_SOCKET" after OverlayEnvironment.
struct ConfigEntry {
  std::string name;
  std::string value_text;
  std::string source;

  friend bool operator==(const ConfigEntry&, const ConfigEntry&) = default;
};

// Parses `text` (the contents of `path`, which is used only in sources and messages) against
// `known`. Returns the entries in file order. Errors (InvalidArgument), each naming the file
// and line: TOML syntax, a key not in `known`, a value of the wrong type, a table where a value
// belongs, a relative path for a kPath setting, a negative kInteger.
[[nodiscard]] Result<std::vector<ConfigEntry>> ParseConfigFile(std::string_view text,
                                                               std::string_view path,
                                                               const std::vector<ConfigKey>& known);

// Reads `path` and parses it. A missing file is NotFound (the caller decides whether that is
// fine: the default path may be absent, a path named explicitly may not).
[[nodiscard]] Result<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path,
                                                              const std::vector<ConfigKey>& known);

// Looks up an environment variable; nullopt when unset. Tests pass a map, the worker getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Environment over file: every known setting whose env var is set comes out with the env's
// value and source "env:NAME" (whether or not the file had it); the file's other entries are
// kept as they are. Order: the file's entries first (in file order), then env-only settings in
// the order of `known`.
std::vector<ConfigEntry> OverlayEnvironment(const std::vector<ConfigEntry>& file_entries,
                                            const std::vector<ConfigKey>& known,
                                            const EnvLookup& env);

// The (VARIABLE, value) pairs to export so that env-reading code sees the file's settings:
// one per file entry whose env var is unset. An env var that is set is never overwritten.
std::vector<std::pair<std::string, std::string>> EnvironmentAssignments(
    const std::vector<ConfigEntry>& file_entries, const std::vector<ConfigKey>& known,
    const EnvLookup& env);

// Every setting the project has today that an operator may put in worker.toml: the name is the
// env var without CODESPACE_, lower-cased (CODESPACE_API_SOCKET -> api_socket).
const std::vector<ConfigKey>& WorkerConfigKeys();

// Where the worker looks: $CODESPACE_CONFIG_FILE, else /etc/codespace/worker.toml.
inline constexpr const char kConfigFileEnv[] = "CODESPACE_CONFIG_FILE";
inline constexpr const char kDefaultConfigFile[] = "/etc/codespace/worker.toml";

// The worker's start (side effects: reads the file and calls setenv, so call it while the
// process is one thread, before anything reads a setting). The file is $CODESPACE_CONFIG_FILE,
// which must exist when set, else kDefaultConfigFile when it exists. Its settings that the
// environment does not set are exported. Returns one line for the log ("" when no file was
// read); any error (unreadable file, syntax, unknown key, type) means: do not start.
[[nodiscard]] Result<std::string> ApplyConfigFileToEnvironment(const std::vector<ConfigKey>& known);

}  // namespace codespace
