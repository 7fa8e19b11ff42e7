#include "config/config_file.h"

#include <fmt/format.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "base/file_util.h"

namespace codespace {

std::string_view ConfigTypeName(ConfigType type) {
  switch (type) {
    case ConfigType::kString:
      return "a string";
    case ConfigType::kPath:
      return "an absolute path (a string)";
    case ConfigType::kInteger:
      return "an integer";
    case ConfigType::kBoolean:
      return "a boolean (true or false)";
  }
  return "?";
}

namespace {

std::string_view NodeTypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

const ConfigKey* FindKey(const std::vector<ConfigKey>& known, std::string_view name) {
  auto it =
      std::find_if(known.begin(), known.end(), [&](const ConfigKey& k) { return k.name == name; });
  return it == known.end() ? nullptr : &*it;
}

bool IsTablePrefix(const std::vector<ConfigKey>& known, const std::string& prefix) {
  return std::any_of(known.begin(), known.end(),
                     [&](const ConfigKey& k) { return k.name.rfind(prefix + ".", 0) == 0; });
}

std::string KnownNames(const std::vector<ConfigKey>& known) {
  std::string out;
  for (const auto& k : known) out += (out.empty() ? "" : ", ") + k.name;
  return out;
}

// The value text of `node` for `key`, or the reason it does not fit.
Result<std::string> ValueText(const ConfigKey& key, const toml::node& node) {
  auto mismatch = [&] {
    return InvalidArgumentError(
        fmt::format("expected {}, got {}", ConfigTypeName(key.type), NodeTypeName(node)));
  };
  switch (key.type) {
    case ConfigType::kString:
    case ConfigType::kPath: {
      const auto* s = node.as_string();
      if (s == nullptr) return mismatch();
      std::string v = s->get();
      if (key.type == ConfigType::kPath && (v.empty() || v[0] != '/')) {
        return InvalidArgumentError(fmt::format("expected an absolute path, got \"{}\"", v));
      }
      return v;
    }
    case ConfigType::kInteger: {
      const auto* i = node.as_integer();
      if (i == nullptr) return mismatch();
      int64_t v = i->get();
      if (v < 0) return InvalidArgumentError(fmt::format("expected an integer >= 0, got {}", v));
      return std::to_string(v);
    }
    case ConfigType::kBoolean: {
      const auto* b = node.as_boolean();
      if (b == nullptr) return mismatch();
      return std::string(b->get() ? "1" : "0");
    }
  }
  return mismatch();
}

struct Walker {
  std::string_view path;
  const std::vector<ConfigKey>& known;
  std::vector<std::pair<uint32_t, ConfigEntry>> entries;  // with the line, to sort by it

  std::string Where(const toml::node& node) const {
    return fmt::format("{}:{}", path, node.source().begin.line);
  }

  Status Walk(const toml::table& table, const std::string& prefix) {
    for (const auto& [k, node] : table) {
      std::string name =
          prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      const ConfigKey* key = FindKey(known, name);
      if (key == nullptr) {
        if (node.is_table() && IsTablePrefix(known, name)) {
          RETURN_IF_ERROR(Walk(*node.as_table(), name));
          continue;
        }
        return InvalidArgumentError(fmt::format("{}: unknown setting \"{}\" (known: {})",
                                                Where(node), name, KnownNames(known)));
      }
      auto text = ValueText(*key, node);
      if (!text.ok()) {
        return InvalidArgumentError(
            fmt::format("{}: {}: {}", Where(node), name, text.status().message()));
      }
      entries.emplace_back(node.source().begin.line,
                           ConfigEntry{name, std::move(*text), "file:" + Where(node)});
    }
    return OkStatus();
  }
};

}  // namespace

Result<std::vector<ConfigEntry>> ParseConfigFile(std::string_view text, std::string_view path,
                                                 const std::vector<ConfigKey>& known) {
  toml::table root;
  // toml++ (Debian's shared library) reports syntax errors by throwing; they stop here.
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(
        fmt::format("{}:{}: TOML syntax error: {}", path, e.source().begin.line, e.description()));
  }
  Walker w{path, known, {}};
  RETURN_IF_ERROR(w.Walk(root, ""));
  // toml++ keeps a table's keys sorted; the entries follow the file's lines instead.
  std::stable_sort(w.entries.begin(), w.entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ConfigEntry> out;
  for (auto& [line, e] : w.entries) out.push_back(std::move(e));
  return out;
}

Result<std::vector<ConfigEntry>> ReadConfigFile(const std::string& path,
                                                const std::vector<ConfigKey>& known) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseConfigFile(text, path, known);
}

std::vector<ConfigEntry> OverlayEnvironment(const std::vector<ConfigEntry>& file_entries,
                                            const std::vector<ConfigKey>& known,
                                            const EnvLookup& env) {
  std::vector<ConfigEntry> out;
  for (const auto& e : file_entries) {
    const ConfigKey* key = FindKey(known, e.name);
    std::optional<std::string> v = key ? env(key->env) : std::nullopt;
    out.push_back(v ? ConfigEntry{e.name, *v, "env:" + key->env} : e);
  }
  for (const auto& k : known) {
    bool in_file = std::any_of(file_entries.begin(), file_entries.end(),
                               [&](const ConfigEntry& e) { return e.name == k.name; });
    if (in_file) continue;
    if (auto v = env(k.env)) out.push_back(ConfigEntry{k.name, *v, "env:" + k.env});
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> EnvironmentAssignments(
    const std::vector<ConfigEntry>& file_entries, const std::vector<ConfigKey>& known,
    const EnvLookup& env) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : file_entries) {
    const ConfigKey* key = FindKey(known, e.name);
    if (key == nullptr || key->env.empty() || env(key->env)) continue;
    out.emplace_back(key->env, e.value_text);
  }
  return out;
}

Result<std::string> ApplyConfigFileToEnvironment(const std::vector<ConfigKey>& known) {
  std::string path = GetEnv(kConfigFileEnv);
  if (path.empty()) {
    // The default file is optional; one named explicitly is not.
    if (::access(kDefaultConfigFile, F_OK) != 0 && errno == ENOENT) return std::string();
    path = kDefaultConfigFile;
  }
  auto entries = ReadConfigFile(path, known);
  if (!entries.ok()) return entries.status().WithContext("configuration file");
  EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto assignments = EnvironmentAssignments(*entries, known, env);
  for (const auto& [name, value] : assignments) {
    if (::setenv(name.c_str(), value.c_str(), 1) != 0)
      return ErrnoError("setenv(" + name + ")", errno);
  }
  return fmt::format("configuration {}: {} setting(s), {} overridden by the environment", path,
                     entries->size(), entries->size() - assignments.size());
}

const std::vector<ConfigKey>& WorkerConfigKeys() {
  static const std::vector<ConfigKey> keys = {
      {"state_dir", ConfigType::kPath, "CODESPACE_STATE_DIR"},
      {"bwrap_path", ConfigType::kPath, "CODESPACE_BWRAP_PATH"},
      {"init_path", ConfigType::kPath, "CODESPACE_INIT_PATH"},
      {"require_confinement", ConfigType::kBoolean, "CODESPACE_REQUIRE_CONFINEMENT"},
      {"probe_cache_seconds", ConfigType::kInteger, "CODESPACE_PROBE_CACHE_SECONDS"},
      {"pool_v4", ConfigType::kString, "CODESPACE_POOL_V4"},
      {"pool_v6", ConfigType::kString, "CODESPACE_POOL_V6"},
      {"dns_upstream", ConfigType::kString, "CODESPACE_DNS_UPSTREAM"},
      {"api_socket", ConfigType::kPath, "CODESPACE_API_SOCKET"},
      {"api_group", ConfigType::kString, "CODESPACE_API_GROUP"},
      {"api_listen", ConfigType::kString, "CODESPACE_API_LISTEN"},
      {"api_token_file", ConfigType::kPath, "CODESPACE_API_TOKEN_FILE"},
      {"drain_grace_ms", ConfigType::kInteger, "CODESPACE_DRAIN_GRACE_MS"},
      {"stop_grace_ms", ConfigType::kInteger, "CODESPACE_STOP_GRACE_MS"},
      {"worker_poll_ms", ConfigType::kInteger, "CODESPACE_WORKER_POLL_MS"},
      {"supervisor_exec", ConfigType::kBoolean, "CODESPACE_SUPERVISOR_EXEC"},
      {"run_uids", ConfigType::kString, "CODESPACE_RUN_UIDS"},
      {"cgroup_root", ConfigType::kPath, "CODESPACE_CGROUP_ROOT"},
      {"require_limits", ConfigType::kBoolean, "CODESPACE_REQUIRE_LIMITS"},
      {"default_memory", ConfigType::kString, "CODESPACE_DEFAULT_MEMORY"},
      {"default_pids", ConfigType::kString, "CODESPACE_DEFAULT_PIDS"},
      {"default_cpus", ConfigType::kString, "CODESPACE_DEFAULT_CPUS"},
      {"default_tmp_size", ConfigType::kString, "CODESPACE_DEFAULT_TMP_SIZE"},
      {"default_nofile", ConfigType::kString, "CODESPACE_DEFAULT_NOFILE"},
      {"max_memory", ConfigType::kString, "CODESPACE_MAX_MEMORY"},
      {"max_pids", ConfigType::kString, "CODESPACE_MAX_PIDS"},
      {"max_cpus", ConfigType::kString, "CODESPACE_MAX_CPUS"},
      {"max_tmp_size", ConfigType::kString, "CODESPACE_MAX_TMP_SIZE"},
      {"max_nofile", ConfigType::kString, "CODESPACE_MAX_NOFILE"},
      {"prune_after", ConfigType::kString, "CODESPACE_PRUNE_AFTER"},
  };
  return keys;
}

}  // namespace codespace
