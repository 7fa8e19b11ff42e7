#include "api/posture_value.h"

#include <string>

namespace codespace::api {

nlohmann::json PostureValue(const HostFacts& f) {
  nlohmann::json j;
  j["line"] = PostureLine(f);
  j["uid"] = f.uid;
  j["confines"] = f.confines;
  j["bwrap"] = f.bwrap_path;
  j["confine_error"] = f.confine_error;
  j["tools"] = f.tools();
  j["can_filter"] = f.can_filter();
  j["filter_unavailable"] = f.verdict.unavailable_reason;
  j["allowlist"] = std::string(AllowlistOutcomeWord(f));
  j["view"] = f.confines ? "default" : "host";
  j["identity"] = f.identity;
  j["run_uids"] = f.run_uids;
  j["identity_error"] = f.identity_error;
  j["limits"] = std::string(CgroupHierarchyName(f.limits.hierarchy));
  j["limits_unavailable"] = f.limits.unavailable_reason;
  j["seccomp"] = f.seccomp_error.empty();
  j["seccomp_error"] = f.seccomp_error;
  j["refusal"] = ConfinementRefusal(f);
  return j;
}

}  // namespace codespace::api
