// The YAML keys of admission control, `tenant_limits:` and `admission:`, read into an
// AdmissionConfig (prefixgate/gateway/admission.h). Errors name the key
// ("tenant_limits.team-a.requests_per_minute"), as the rest of config.cpp's do.
#pragma once

#include "prefixgate/base/status.h"
#include "prefixgate/gateway/admission.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace prefixgate::gateway {

// tenant_limits: {default: {requests_per_minute, tokens_per_minute, max_concurrent}, NAME: ...}
Status apply_tenant_limits(const YAML::Node& node, AdmissionConfig& out);
// admission: {max_inflight, max_queue, queue_timeout_ms, default_max_tokens}
Status apply_admission(const YAML::Node& node, AdmissionConfig& out);

}  // namespace prefixgate::gateway
