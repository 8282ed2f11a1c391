-- wrk script for `prefixgate-bench overhead --lua`: a long agent conversation that grows. Every
-- request is overhead_request.json with `TURNS` earlier turns (~2.7 KB each, alternating user
-- and assistant) before its user message, and that user message made new by a per-request
-- counter: what an agent loop sends, where only the last turn is new. TURNS is read from the
-- environment (default 10: a ~30 KB body). API=messages sends the same conversation to the
-- Anthropic Messages API (overhead_request_messages.json: the system prompt as `system`, the
-- tools with `input_schema`), API=responses to the OpenAI Responses API
-- (overhead_request_responses.json: `instructions` and `input`), instead of Chat Completions.
-- done() prints the same PGBENCH line as overhead_request.lua.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local api = os.getenv("API") or "chat"
local bodies = {chat = "overhead_request.json", messages = "overhead_request_messages.json",
                responses = "overhead_request_responses.json"}
local paths = {chat = "/v1/chat/completions", messages = "/v1/messages",
               responses = "/v1/responses"}
assert(bodies[api], "API is chat, messages or responses, not " .. api)
local file = assert(io.open(here .. bodies[api], "rb"))
local base = file:read("*a"):gsub("%s+$", "")
file:close()

local turns = tonumber(os.getenv("TURNS") or "10")
local words = {"the", "cache", "prefix", "replica", "token", "request", "model", "answer",
               "policy", "user", "tool", "schema", "result", "file", "line", "function",
               "error", "return", "value", "search", "query", "and", "is", "a"}
local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
local function text(bytes)
  local out = {}
  local size = 0
  while size < bytes do
    local w = words[rand(#words)]
    out[#out + 1] = w
    size = size + #w + 1
  end
  return table.concat(out, " ")
end

local earlier = {}
for i = 1, turns do
  local role = (i % 2 == 1) and "user" or "assistant"
  earlier[#earlier + 1] = string.format('{"role":"%s","content":"%s"},', role, text(2700))
end
local at = assert(base:find('{"role":"user"', 1, true))
local head = base:sub(1, at - 1) .. table.concat(earlier)
local user_start = '{"role":"user","content":"'
local tail = base:sub(at + #user_start)

wrk.method = "POST"
wrk.path = paths[api]
wrk.headers["Content-Type"] = "application/json"

local counter = 0
local thread_id = 0
function setup(thread)
  thread_id = thread_id + 1
  thread:set("id", thread_id)
end

function request()
  counter = counter + 1
  local body = head .. user_start .. "request " .. tostring(id or 0) .. "-" .. counter .. ": " .. tail
  wrk.body = body
  return wrk.format(nil, nil, nil, body)
end

done = dofile(here .. "pgbench_line.lua")(#head + #tail + 40)
