// Reading one multipart ZeroMQ message, for the publisher's replay socket and the gateway's
// subscribers (both non-blocking: they poll first). A raw libzmq socket (void*), so callers need
// no ZeroMQ C++ wrapper.
//
//   std::vector<std::string> frames = kv_events::recv_frames(socket);  // {} when none waits
#pragma once

#include <string>
#include <vector>

namespace prefixgate::kv_events {

// Every frame of the next message; empty when none is waiting (or the context is shutting down).
std::vector<std::string> recv_frames(void* socket);

}  // namespace prefixgate::kv_events
