// codespace: the command-line front door.
//
//   codespace posture                     probe the host, print the posture line
//   codespace plan [--egress ...]         the public admission: plan, namespace, reason
//   codespace run [...] -- CMD ARGS...    run in the foreground, exit with the command's status
//   codespace runs | show ID              the records
//
// Exit codes of `run`, like `docker run`: the command's own; 128+N when a signal killed it;
// 125 when codespace itself failed or refused the run; 126 when the command cannot be invoked;
// 127 when it is not found.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/file_util.h"
#include "cli/record_format.h"
#include "cli/state_dir.h"
#include "plan/admission.h"
#include "posture/host_facts.h"
#include "probe/host_probe.h"
#include "sandbox/launcher.h"
#include "sandbox/run_outcome.h"
#include "store/record_json.h"
#include "store/sqlite_run_store.h"
#include "worker/local_runner.h"
#include "worker/namespace_sweep.h"

namespace codespace {
namespace {

struct SpecFlags {
  std::string egress = "none";
  std::vector<std::string> allow;
  std::string workspace;
  std::vector<std::string> env;
  int64_t timeout = 0;
  std::vector<std::string> command;
};

void AddSpecFlags(CLI::App* app, SpecFlags* f, bool with_command) {
  app->add_option("--egress", f->egress, "Egress policy: none | allowlist | open")
      ->default_str("none");
  app->add_option("--allow", f->allow,
                  "Allowlist entry (repeatable): host, *.suffix, IPv4/IPv6 address or CIDR, "
                  "optional :port ([v6]:port)")
      ->allow_extra_args(false);  // one value per --allow, so "--" still starts the command
  if (!with_command) return;
  app->add_option("--workspace", f->workspace,
                  "Directory bound read-write and used as the working directory (default: "
                  "the current directory)");
  app->add_option("--env", f->env, "KEY=VALUE for the run's environment (repeatable)")
      ->allow_extra_args(false);
  app->add_option("--timeout", f->timeout, "Wall-clock timeout in seconds (0: none)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("command", f->command, "The command and its arguments, after --")->required();
}

Result<RunSpec> SpecFromFlags(const SpecFlags& f) {
  RunSpec spec;
  ASSIGN_OR_RETURN(SandboxEgressPolicy mode, ParseEgressPolicy(f.egress));
  ASSIGN_OR_RETURN(spec.egress, MakeEgressPolicy(mode, f.allow));
  for (const auto& kv : f.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError(fmt::format("--env \"{}\": expected KEY=VALUE", kv));
    }
  }
  spec.env = f.env;
  spec.argv = f.command;
  std::string ws = f.workspace;
  if (ws.empty()) {
    char cwd[4096];
    if (!::getcwd(cwd, sizeof(cwd))) return ErrnoError("getcwd", errno);
    ws = cwd;
  }
  char resolved[4096];
  if (!::realpath(ws.c_str(), resolved)) {
    return ErrnoError(fmt::format("--workspace {}", ws), errno);
  }
  spec.workspace = resolved;
  spec.timeout = std::chrono::seconds(f.timeout);
  return spec;
}

void PrintError(const Status& s) { fmt::print(stderr, "codespace: {}\n", s.message()); }

HostFacts ProbeAndReport(bool quiet) {
  HostFacts facts = ProbeHost(ProbeOptionsFromEnvironment());
  if (!quiet) fmt::print(stderr, "{}\n", PostureLine(facts));
  return facts;
}

Result<std::unique_ptr<SqliteRunStore>> OpenStore(const std::string& state_dir) {
  RETURN_IF_ERROR(MakeDirs(state_dir, 0700));
  return SqliteRunStore::Open(state_dir + "/codespace.db");
}

int CmdPosture() {
  HostFacts facts = ProbeHost(ProbeOptionsFromEnvironment());
  fmt::print("{}\n", PostureLine(facts));
  std::string refusal = ConfinementRefusal(facts);
  if (!refusal.empty()) {
    fmt::print(stderr, "codespace: {}\n", refusal);
    return kExitCodespaceFailed;
  }
  return 0;
}

int CmdPlan(const SpecFlags& flags, bool quiet) {
  SpecFlags f = flags;
  f.command = {"true"};
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) {
    PrintError(spec.status());
    return kExitCodespaceFailed;
  }
  HostFacts facts = ProbeAndReport(quiet);
  std::string id = NewRunId();
  Admission a = Admit(facts, *spec, id);
  fmt::print("admitted: {}\nplan: {}\nnetwork: {}\nnamespace: {}\nreason: {}\n",
             a.admitted ? "yes" : "no", PlanName(a.decision.plan),
             NetworkPostureName(PostureOfPlan(a.decision.plan)),
             a.namespace_name.empty() ? "-" : a.namespace_name + " (for run " + id + ")",
             a.reason.empty() ? "-" : a.reason);
  return a.admitted ? 0 : kExitCodespaceFailed;
}

int CmdRun(const SpecFlags& flags, bool quiet, const std::string& state_dir) {
  auto spec = SpecFromFlags(flags);
  if (!spec.ok()) {
    PrintError(spec.status());
    return kExitCodespaceFailed;
  }
  HostFacts facts = ProbeAndReport(quiet);
  std::string refusal = ConfinementRefusal(facts);
  if (!refusal.empty()) {
    fmt::print(stderr, "codespace: {}\n", refusal);
    return kExitCodespaceFailed;
  }
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  RunnerConfig base;
  base.init_path = FindSandboxInit();
  base.hidden_dirs = {state_dir};
  auto config = RunnerConfigFromEnvironment(base);
  if (!config.ok()) {
    PrintError(config.status());
    return kExitCodespaceFailed;
  }
  // What finished runs of this store left behind (a worker killed mid-teardown) goes first.
  SweepResult swept = SweepFinishedRunNamespaces(**store, facts);
  for (const auto& e : swept.errors) fmt::print(stderr, "codespace: sweep: {}\n", e);
  if (!quiet && !swept.removed.empty()) {
    fmt::print(stderr, "codespace: removed {} leftover namespace(s) of finished runs\n",
               swept.removed.size());
  }
  LocalProcessRunner runner(facts, store->get(), *config);
  auto created = runner.Create(*spec);
  if (!created.ok()) {
    PrintError(created.status());
    return kExitCodespaceFailed;
  }
  if (!quiet) {
    fmt::print(stderr, "run {} plan={} network={}{}{}\n", created->id, PlanName(created->plan),
               NetworkPostureName(created->network),
               created->namespace_name.empty() ? "" : " namespace=" + created->namespace_name,
               created->reason.empty() ? "" : fmt::format(" reason=\"{}\"", created->reason));
  }
  if (created->state == RunState::kRefused) {
    fmt::print(stderr, "codespace: run {} refused: {}\n", created->id, created->reason);
    return kExitCodespaceFailed;
  }
  auto done = runner.Execute(*created, STDOUT_FILENO, STDERR_FILENO);
  if (!done.ok()) {
    PrintError(done.status());
    return kExitCodespaceFailed;
  }
  const RunRecord& r = *done;
  if (r.state == RunState::kAborted) {
    fmt::print(stderr, "codespace: run {} aborted: {}\n", r.id, r.reason);
    return kExitCodespaceFailed;
  }
  if (r.state == RunState::kCancelled) {
    fmt::print(stderr, "codespace: run {} cancelled: {}\n", r.id, r.reason);
  }
  if (r.signal) return 128 + *r.signal;
  return r.exit_code.value_or(kExitCodespaceFailed);
}

int CmdRuns(const std::string& state_dir, const std::string& state, size_t limit, bool json) {
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  RunListOptions opts;
  opts.limit = limit;
  if (!state.empty()) {
    auto s = ParseRunState(state);
    if (!s.ok()) {
      PrintError(s.status());
      return kExitCodespaceFailed;
    }
    opts.state = *s;
  }
  auto runs = (*store)->List(opts);
  if (!runs.ok()) {
    PrintError(runs.status());
    return kExitCodespaceFailed;
  }
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < runs->size(); ++i) {
      out += (i ? "," : "") + RunRecordToJson((*runs)[i], false);
    }
    fmt::print("{}]\n", out);
  } else {
    fmt::print("{}", FormatRecordTable(*runs));
  }
  return 0;
}

int CmdShow(const std::string& state_dir, const std::string& id, bool json) {
  auto store = OpenStore(state_dir);
  if (!store.ok()) {
    PrintError(store.status());
    return kExitCodespaceFailed;
  }
  Result<RunRecord> rec = NotFoundError("no runs");
  if (id == "latest") {
    RunListOptions opts;
    opts.limit = 1;
    auto runs = (*store)->List(opts);
    if (runs.ok() && !runs->empty()) rec = runs->front();
  } else {
    rec = (*store)->Get(id);
  }
  if (!rec.ok()) {
    PrintError(rec.status());
    return kExitCodespaceFailed;
  }
  fmt::print("{}", json ? RunRecordToJson(*rec, true) + "\n" : FormatRecord(*rec));
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"codespace: run untrusted commands in bubblewrap sandboxes with a network egress "
               "policy per run, and keep a durable record of every run."};
  app.require_subcommand(1);
  bool quiet = false;
  std::string state_dir = DefaultStateDir();
  app.add_flag("--quiet,-q", quiet, "Do not print the posture line");
  app.add_option("--state-dir", state_dir, "Where records are kept (CODESPACE_STATE_DIR)")
      ->default_str(state_dir);

  app.add_subcommand("posture", "Probe the host and print the posture line");

  SpecFlags plan_flags;
  auto* plan = app.add_subcommand(
      "plan", "Public admission: the plan, predicted namespace and reason (runs nothing)");
  AddSpecFlags(plan, &plan_flags, false);

  SpecFlags run_flags;
  auto* run = app.add_subcommand("run", "Run a command in a sandbox, in the foreground");
  AddSpecFlags(run, &run_flags, true);
  run->add_flag("--quiet,-q", quiet, "Do not print the posture and run lines");

  std::string runs_state;
  size_t runs_limit = 50;
  bool runs_json = false;
  auto* runs = app.add_subcommand("runs", "List run records, newest first");
  runs->add_option("--state", runs_state, "Only runs in this state");
  runs->add_option("--limit", runs_limit, "At most this many")->default_str("50");
  runs->add_flag("--json", runs_json, "JSON array of records");

  std::string show_id;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "Show one run's record");
  show->add_option("id", show_id, "Run id, or \"latest\"")->required();
  show->add_flag("--json", show_json, "The record as JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitCodespaceFailed;
  }
  if (app.got_subcommand("posture")) return CmdPosture();
  if (app.got_subcommand("plan")) return CmdPlan(plan_flags, quiet);
  if (app.got_subcommand("run")) return CmdRun(run_flags, quiet, state_dir);
  if (app.got_subcommand("runs")) return CmdRuns(state_dir, runs_state, runs_limit, runs_json);
  if (app.got_subcommand("show")) return CmdShow(state_dir, show_id, show_json);
  return kExitCodespaceFailed;
}

}  // namespace
}  // namespace codespace

int main(int argc, char** argv) { return codespace::Main(argc, argv); }
