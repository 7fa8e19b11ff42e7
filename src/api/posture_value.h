// The host facts as JSON: `GET /v1/posture` and `codespace posture --json` answer this one
// value, so the API and the CLI never describe a host differently.
#pragma once

#include <nlohmann/json.hpp>

#include "posture/host_facts.h"

namespace codespace::api {

nlohmann::json PostureValue(const HostFacts& facts);

}  // namespace codespace::api
