// The CLI's small decisions, as pure functions of what was typed (table-tested in
// cli_rules_test.cc): which egress a set of flags means, what a parse error says, how an env file
// reads, and how a command fits on one line of the `runs` table.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

// The egress policy the flags mean: `given` as typed (empty: no --egress), else "allowlist"
// when there is an --allow (what was meant), else "none". An explicit --egress is never
// changed: `--egress none --allow x` stays the error MakeEgressPolicy makes of it.
std::string EffectiveEgress(std::string_view given, const std::vector<std::string>& allow);

// What to say for arguments the parser did not expect, in `command` ("codespace run"):
// names the first unknown flag (a leading '-'), else the unknown subcommand (top level) or
// the stray argument, and points to `--help`. `remaining`: the unexpected arguments in order;
// a lone "--" among them is skipped.
std::string UnexpectedArgumentsMessage(std::string_view command, bool top_level,
                                       const std::vector<std::string>& remaining);

// An env file: KEY=VALUE lines; blank lines and lines starting with '#' are skipped; a line
// without '=' (or with an empty key) is an error naming its line number.
Result<std::vector<std::string>> ParseEnvFile(std::string_view text, std::string_view name);

// `text` on one line: newline, carriage return, tab and other control bytes escaped (\n, \r,
// \t, \xNN), so a record's command never breaks the `runs` table's one line per run.
std::string OneLine(std::string_view text);

}  // namespace codespace
