#include "config/config.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace codespace {
namespace {

// Every setting, one line each (see config.h). Settings read directly elsewhere today and not yet
// passed down from here are listed all the same: this is the one table of them.
constexpr std::array kSettings = {
    SettingDef{"state_dir", "CODESPACE_STATE_DIR", "",
               "records, logs, run directories (empty: /var/lib/codespace as root, else XDG)"},
    SettingDef{"bwrap_path", "CODESPACE_BWRAP_PATH", "", "bubblewrap to use (empty: PATH)"},
    SettingDef{"init_path", "CODESPACE_INIT_PATH", "",
               "codespace-init (empty: beside the codespace binary)"},
    SettingDef{"require_confinement", "CODESPACE_REQUIRE_CONFINEMENT", "0",
               "1: refuse every run when bubblewrap does not confine"},
    SettingDef{"probe_cache_seconds", "CODESPACE_PROBE_CACHE_SECONDS", "600",
               "how long the host probes are remembered (0: probe every time)"},
    SettingDef{"pool_v4", "CODESPACE_POOL_V4", "10.201.0.0/16",
               "addresses of filtered runs' veth pairs (IPv4)"},
    SettingDef{"pool_v6", "CODESPACE_POOL_V6", "fd63:6373:7061::/48",
               "addresses of filtered runs' veth pairs (IPv6)"},
    SettingDef{"dns_upstream", "CODESPACE_DNS_UPSTREAM", "",
               "resolver the DNS gate forwards to, ADDRESS[#PORT] (empty: resolv.conf)"},
    SettingDef{"drain_grace_ms", "CODESPACE_DRAIN_GRACE_MS", "5000",
               "how long output is read after the main process exits"},
    SettingDef{"stop_grace_ms", "CODESPACE_STOP_GRACE_MS", "5000",
               "SIGTERM to SIGKILL on timeout or cancel"},
    SettingDef{"worker_poll_ms", "CODESPACE_WORKER_POLL_MS", "100",
               "how often the worker looks at the store for queued runs"},
    SettingDef{"supervisor_exec", "CODESPACE_SUPERVISOR_EXEC", "0",
               "1: `run` execs its supervisor instead of forking it"},
    SettingDef{"api_socket", "CODESPACE_API_SOCKET", "",
               "the API's unix socket (empty: in the state directory)"},
    SettingDef{"api_group", "CODESPACE_API_GROUP", "", "group allowed on the API socket"},
    SettingDef{"api_listen", "CODESPACE_API_LISTEN", "", "HOST:PORT of a TCP API (needs a token)"},
    SettingDef{"api_token_file", "CODESPACE_API_TOKEN_FILE", "", "bearer token of the TCP API"},
    SettingDef{"run_uids", "CODESPACE_RUN_UIDS", "600000-665535",
               "a root worker's runs' host uids and gids, FIRST-LAST (no account may use them)"},
    SettingDef{"cgroup_root", "CODESPACE_CGROUP_ROOT", "",
               "where runs' cgroups are made (empty: /sys/fs/cgroup, under the worker's own)"},
    SettingDef{"require_limits", "CODESPACE_REQUIRE_LIMITS", "0",
               "1: a run without a memory, process or CPU limit gets the defaults, or is refused"},
    SettingDef{"default_memory", "CODESPACE_DEFAULT_MEMORY", "", "a run's memory limit, e.g. 2G"},
    SettingDef{"default_pids", "CODESPACE_DEFAULT_PIDS", "", "a run's process limit"},
    SettingDef{"default_cpus", "CODESPACE_DEFAULT_CPUS", "", "a run's CPU limit in cores, e.g. 1.5"},
    SettingDef{"default_tmp_size", "CODESPACE_DEFAULT_TMP_SIZE", "", "a run's /tmp and /var/tmp"},
    SettingDef{"default_nofile", "CODESPACE_DEFAULT_NOFILE", "", "a run's open-file limit"},
    SettingDef{"max_memory", "CODESPACE_MAX_MEMORY", "", "the most memory a run may ask for"},
    SettingDef{"max_pids", "CODESPACE_MAX_PIDS", "", "the most processes a run may ask for"},
    SettingDef{"max_cpus", "CODESPACE_MAX_CPUS", "", "the most cores a run may ask for"},
    SettingDef{"max_tmp_size", "CODESPACE_MAX_TMP_SIZE", "", "the largest /tmp a run may ask for"},
    SettingDef{"max_nofile", "CODESPACE_MAX_NOFILE", "", "the most open files a run may ask for"},
    SettingDef{"prune_after", "CODESPACE_PRUNE_AFTER", "",
               "the worker removes ended runs older than this, e.g. 30d (empty: never)"},
};

}  // namespace

std::string_view ConfigSourceName(ConfigSource source) {
  switch (source) {
    case ConfigSource::kDefault:
      return "default";
    case ConfigSource::kEnvironment:
      return "env";
    case ConfigSource::kFile:
      return "file";
  }
  return "default";
}

std::span<const SettingDef> SettingDefs() { return kSettings; }

ConfigLayer EnvironmentLayer() {
  ConfigLayer layer{ConfigSource::kEnvironment, {}};
  for (const SettingDef& d : kSettings) {
    if (const char* v = ::getenv(std::string(d.env).c_str())) {
      layer.values.emplace_back(std::string(d.name), v);
    }
  }
  return layer;
}

Config Config::FromLayers(std::span<const ConfigLayer> layers) {
  Config c;
  for (const SettingDef& d : kSettings) {
    c.settings_.push_back({&d, std::string(d.default_value), ConfigSource::kDefault});
  }
  for (const ConfigLayer& layer : layers) {
    for (const auto& [name, value] : layer.values) {
      for (Setting& s : c.settings_) {
        if (s.def->name != name) continue;
        s.value = value;
        s.source = layer.source;
      }
    }
  }
  return c;
}

Config Config::Load() {
  const ConfigLayer layers[] = {EnvironmentLayer()};
  return FromLayers(layers);
}

const Config::Setting& Config::Find(std::string_view name) const {
  for (const Setting& s : settings_) {
    if (s.def->name == name) return s;
  }
  std::fprintf(stderr, "codespace: no setting \"%.*s\" in config.cc's table\n",
               static_cast<int>(name.size()), name.data());
  std::abort();
}

const std::string& Config::Get(std::string_view name) const { return Find(name).value; }

ConfigSource Config::SourceOf(std::string_view name) const { return Find(name).source; }

std::string Config::ToText() const {
  std::string out;
  for (const Setting& s : settings_) {
    out += fmt::format("{:<20} {:<22} {:<8} {}\n", s.def->name, s.value.empty() ? "\"\"" : s.value,
                       ConfigSourceName(s.source), s.def->env);
  }
  return out;
}

std::string Config::ToJson() const {
  nlohmann::json j = nlohmann::json::array();
  for (const Setting& s : settings_) {
    j.push_back({{"name", s.def->name},
                 {"value", s.value},
                 {"source", ConfigSourceName(s.source)},
                 {"env", s.def->env},
                 {"default", s.def->default_value},
                 {"what", s.def->what}});
  }
  return j.dump(2) + "\n";
}

}  // namespace codespace
