#include "config/config_file.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "base/testing/status_matchers.h"
#include "base/testing/temp_dir.h"

namespace codespace {
namespace {

using ::codespace::testing::StatusHasMessage;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kPath[] = "/etc/codespace/worker.toml";

EnvLookup EnvOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// A valid value, in TOML, for each type, and the value text it must come out as.
struct Sample {
  std::string toml;
  std::string text;
};
Sample SampleFor(ConfigType type) {
  switch (type) {
    case ConfigType::kString:
      return {"\"some text\"", "some text"};
    case ConfigType::kPath:
      return {"\"/srv/codespace/x\"", "/srv/codespace/x"};
    case ConfigType::kInteger:
      return {"250", "250"};
    case ConfigType::kBoolean:
      return {"true", "1"};
  }
  return {};
}

// Every key the worker knows reads back with its value text and the line it is on.
TEST(ConfigFileTest, EveryWorkerKeyReadsBackWithItsLine) {
  const auto& keys = WorkerConfigKeys();
  ASSERT_GE(keys.size(), 16u);
  std::string text = "# codespace worker\n";
  std::vector<ConfigEntry> want;
  int line = 2;
  for (const auto& k : keys) {
    Sample s = SampleFor(k.type);
    text += k.name + " = " + s.toml + "\n";
    want.push_back(ConfigEntry{k.name, s.text, fmt::format("file:{}:{}", kPath, line++)});
  }
  auto got = ParseConfigFile(text, kPath, keys);
  ASSERT_OK(got);
  EXPECT_EQ(*got, want);
}

// Each key's name is its env var without CODESPACE_, lower-cased: one rule an operator can use.
TEST(ConfigFileTest, WorkerKeyNamesFollowTheirEnvVars) {
  for (const auto& k : WorkerConfigKeys()) {
    std::string lower;
    for (char c : k.env.substr(std::string("CODESPACE_").size()))
      lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(k.name, lower) << k.env;
    EXPECT_EQ(k.env.rfind("CODESPACE_", 0), 0u) << k.env;
  }
}

TEST(ConfigFileTest, BooleansAreOneAndZero) {
  auto got = ParseConfigFile("require_confinement = false\nsupervisor_exec = true\n", kPath,
                             WorkerConfigKeys());
  ASSERT_OK(got);
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].value_text, "0");
  EXPECT_EQ((*got)[1].value_text, "1");
}

TEST(ConfigFileTest, EmptyFileHasNoEntries) {
  auto got = ParseConfigFile("# nothing set\n\n", kPath, WorkerConfigKeys());
  ASSERT_OK(got);
  EXPECT_THAT(*got, IsEmpty());
}

TEST(ConfigFileTest, UnknownKeyNamesTheKeyAndLine) {
  auto got = ParseConfigFile("state_dir = \"/var/lib/codespace\"\n\nstate_dri = \"/x\"\n", kPath,
                             WorkerConfigKeys());
  EXPECT_THAT(got, StatusHasMessage("/etc/codespace/worker.toml:3: unknown setting \"state_dri\""));
}

TEST(ConfigFileTest, UnknownTableIsAnUnknownKey) {
  auto got = ParseConfigFile("[api]\nsocket = \"/run/x.sock\"\n", kPath, WorkerConfigKeys());
  EXPECT_THAT(got, StatusHasMessage("unknown setting \"api\""));
}

// Every type against every wrong kind of TOML value: each is refused, naming key, line and both
// types.
TEST(ConfigFileTest, EveryTypeErrorNamesKeyLineAndTypes) {
  struct Wrong {
    std::string toml;
    std::string got;
  };
  const std::vector<Wrong> wrongs = {
      {"\"text\"", "got a string"},
      {"12", "got an integer"},
      {"1.5", "got a floating-point"},
      {"true", "got a boolean"},
      {"1979-05-27", "got a date"},
      {"07:32:00", "got a time"},
      {"[\"a\", \"b\"]", "got an array"},
      {"{ a = 1 }", "got a table"},
      {"1979-05-27T07:32:00Z", "got a date-time"},
  };
  const std::vector<ConfigKey> keys = {{"s", ConfigType::kString, "S"},
                                       {"p", ConfigType::kPath, "P"},
                                       {"i", ConfigType::kInteger, "I"},
                                       {"b", ConfigType::kBoolean, "B"}};
  int refused = 0;
  for (const auto& k : keys) {
    for (const auto& w : wrongs) {
      bool fits = (w.got == "got a string" &&
                   (k.type == ConfigType::kString || k.type == ConfigType::kPath)) ||
                  (w.got == "got an integer" && k.type == ConfigType::kInteger) ||
                  (w.got == "got a boolean" && k.type == ConfigType::kBoolean);
      std::string text = "\n" + k.name + " = " + w.toml + "\n";
      auto got = ParseConfigFile(text, kPath, keys);
      if (fits) {
        if (k.type == ConfigType::kPath) {
          EXPECT_THAT(got, StatusHasMessage("expected an absolute path, got \"text\"")) << text;
        } else {
          EXPECT_OK(got) << text;
        }
        continue;
      }
      ++refused;
      std::string where = std::string(kPath) + ":2: " + k.name + ": expected " +
                          std::string(ConfigTypeName(k.type)) + ", " + w.got;
      EXPECT_THAT(got, StatusHasMessage(where)) << text;
    }
  }
  EXPECT_EQ(refused, 4 * 9 - 4);
}

TEST(ConfigFileTest, RelativePathIsRefused) {
  auto got = ParseConfigFile("api_socket = \"run/api.sock\"\n", kPath, WorkerConfigKeys());
  EXPECT_THAT(got,
              StatusHasMessage(":1: api_socket: expected an absolute path, got \"run/api.sock\""));
}

TEST(ConfigFileTest, NegativeIntegerIsRefused) {
  auto got = ParseConfigFile("stop_grace_ms = -5\n", kPath, WorkerConfigKeys());
  EXPECT_THAT(got, StatusHasMessage(":1: stop_grace_ms: expected an integer >= 0, got -5"));
}

TEST(ConfigFileTest, SyntaxErrorNamesFileAndLine) {
  auto got =
      ParseConfigFile("state_dir = \"/a\"\nstop_grace_ms = = 3\n", kPath, WorkerConfigKeys());
  EXPECT_THAT(got, StatusHasMessage("/etc/codespace/worker.toml:2: TOML syntax error"));
}

TEST(ConfigFileTest, DuplicateKeyIsAnError) {
  auto got = ParseConfigFile("stop_grace_ms = 1\nstop_grace_ms = 2\n", kPath, WorkerConfigKeys());
  EXPECT_THAT(got, StatusHasMessage(":2: TOML syntax error"));
}

// Dotted names are keys inside tables, when the caller's table has them.
TEST(ConfigFileTest, NestedKeysFlattenToDottedNames) {
  const std::vector<ConfigKey> keys = {{"api.socket", ConfigType::kPath, "CODESPACE_API_SOCKET"},
                                       {"top", ConfigType::kInteger, "TOP"}};
  auto got = ParseConfigFile("top = 3\n[api]\nsocket = \"/run/a.sock\"\n", kPath, keys);
  ASSERT_OK(got);
  EXPECT_THAT(*got, ElementsAre(ConfigEntry{"top", "3", "file:/etc/codespace/worker.toml:1"},
                                ConfigEntry{"api.socket", "/run/a.sock",
                                            "file:/etc/codespace/worker.toml:3"}));
  EXPECT_THAT(ParseConfigFile("api = 3\n", kPath, keys),
              StatusHasMessage("unknown setting \"api\""));
}

TEST(ConfigFileTest, EnvironmentOverridesTheFile) {
  auto file = ParseConfigFile("stop_grace_ms = 100\napi_group = \"codespace\"\n", kPath,
                              WorkerConfigKeys());
  ASSERT_OK(file);
  auto env = EnvOf({{"CODESPACE_STOP_GRACE_MS", "7"}, {"CODESPACE_WORKER_POLL_MS", "9"}});
  EXPECT_THAT(
      OverlayEnvironment(*file, WorkerConfigKeys(), env),
      ElementsAre(ConfigEntry{"stop_grace_ms", "7", "env:CODESPACE_STOP_GRACE_MS"},
                  ConfigEntry{"api_group", "codespace", "file:/etc/codespace/worker.toml:2"},
                  ConfigEntry{"worker_poll_ms", "9", "env:CODESPACE_WORKER_POLL_MS"}));
  // What the worker exports: only the file's settings the environment does not already set.
  using Pair = std::pair<std::string, std::string>;
  EXPECT_THAT(EnvironmentAssignments(*file, WorkerConfigKeys(), env),
              ElementsAre(Pair{"CODESPACE_API_GROUP", "codespace"}));
}

// An env var set to the empty string is still set: it wins over the file, as GetEnv sees it.
TEST(ConfigFileTest, EmptyEnvironmentValueStillOverrides) {
  auto file = ParseConfigFile("api_group = \"codespace\"\n", kPath, WorkerConfigKeys());
  ASSERT_OK(file);
  auto env = EnvOf({{"CODESPACE_API_GROUP", ""}});
  EXPECT_THAT(EnvironmentAssignments(*file, WorkerConfigKeys(), env), IsEmpty());
  EXPECT_THAT(OverlayEnvironment(*file, WorkerConfigKeys(), env),
              ElementsAre(ConfigEntry{"api_group", "", "env:CODESPACE_API_GROUP"}));
}

TEST(ConfigFileTest, ReadConfigFileReadsAPathAndSaysWhenMissing) {
  TempDir dir;
  std::string path = dir.path() + "/worker.toml";
  EXPECT_THAT(ReadConfigFile(path, WorkerConfigKeys()), StatusHasMessage(path));
  std::ofstream(path) << "worker_poll_ms = 20\n";
  auto got = ReadConfigFile(path, WorkerConfigKeys());
  ASSERT_OK(got);
  EXPECT_THAT(*got, ElementsAre(ConfigEntry{"worker_poll_ms", "20", "file:" + path + ":1"}));
}

// The shipped example file: every setting the worker knows is in it (commented out), and with
// the comment marks removed it is a valid file.
TEST(ConfigFileTest, ExampleFileListsEverySettingAndParses) {
  std::string path = std::string(CODESPACE_SOURCE_DIR) + "/deploy/worker.toml.example";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string uncommented, line;
  while (std::getline(in, line)) {
    // "#key = value" lines are settings; "# text" lines are prose.
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '#') line.erase(0, 1);
    uncommented += line + "\n";
  }
  auto got = ParseConfigFile(uncommented, path, WorkerConfigKeys());
  ASSERT_OK(got);
  for (const auto& k : WorkerConfigKeys()) {
    bool present = false;
    for (const auto& e : *got) present = present || e.name == k.name;
    EXPECT_TRUE(present) << k.name << " is not in " << path;
  }
}

}  // namespace
}  // namespace codespace
