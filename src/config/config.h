// Config: every setting of codespace in one value — its name, its environment variable, its
// default, its value and where that value came from. Read once when a process starts
// (Config::Load) and passed down; a forked supervisor keeps its parent's, an exec'd one loads it
// again the same way. `codespace config` prints it; docs/configuration.md is its table.
//
// Sources are layers, applied in order, a later one winning: today the defaults and then the
// environment (EnvironmentLayer). A configuration file is one more layer (Source::kFile): write a
// function that returns a ConfigLayer from it and put it between the two in Load.
//
// Adding a setting is one line in kSettings (config.cc): {name, env var, default, what it does};
// then read it with config.Get("name") where it is used, and add its row to
// docs/configuration.md.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace codespace {

enum class ConfigSource { kDefault, kEnvironment, kFile };
std::string_view ConfigSourceName(ConfigSource source);  // "default" | "env" | "file"

// One row of the settings table.
struct SettingDef {
  std::string_view name;           // "drain_grace_ms"
  std::string_view env;            // "CODESPACE_DRAIN_GRACE_MS"
  std::string_view default_value;  // "" when the default is worked out where it is used
  std::string_view what;           // one line for `codespace config` and the docs
};
std::span<const SettingDef> SettingDefs();

// Values one source gives: (setting name -> value), only for the settings it sets.
struct ConfigLayer {
  ConfigSource source = ConfigSource::kDefault;
  std::vector<std::pair<std::string, std::string>> values;
};

// The values of the process environment for every setting whose variable is set (even empty).
ConfigLayer EnvironmentLayer();

class Config {
 public:
  struct Setting {
    const SettingDef* def;
    std::string value;
    ConfigSource source;
  };

  // The defaults, then each layer in order. A layer naming an unknown setting is ignored.
  static Config FromLayers(std::span<const ConfigLayer> layers);
  // What a process starts with: the defaults, then the environment.
  static Config Load();

  // The value of a setting of the table; an unknown name is a programming error (aborts).
  const std::string& Get(std::string_view name) const;
  ConfigSource SourceOf(std::string_view name) const;
  const std::vector<Setting>& settings() const { return settings_; }

  // `codespace config`: one line per setting (name, value, source, env var), or a JSON array.
  std::string ToText() const;
  std::string ToJson() const;

 private:
  const Setting& Find(std::string_view name) const;
  std::vector<Setting> settings_;
};

}  // namespace codespace
