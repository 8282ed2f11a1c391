-- wrk script for the streamed answer's relay cost (cpu_split.sh, gateway_instructions.sh,
-- prefixgate-bench overhead --stream; pgo_train.sh trains on its translated streams): the
-- 3 KB chat of overhead_request.json asking for a streamed answer of `TOKENS` tokens (default
-- 256) instead of one token at once. Run the engine in modelled time (SIM_SPEEDUP=1) so that it
-- sends one server-sent event a token, as a replica decoding does: the proxy then relays
-- TOKENS + 3 events a request, and its CPU per request is mostly that relay. API=messages or
-- API=responses asks the same over the Anthropic Messages or OpenAI Responses API
-- (overhead_request_messages.json, overhead_request_responses.json), whose streams have events
-- of their own (and which the gateway translates from chat chunks for an upstream that speaks
-- only Chat Completions, `;kind=openai`). done() prints the PGBENCH line (pgbench_line.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local api = os.getenv("API") or "chat"
local apis = {
  chat = {"overhead_request.json", "/v1/chat/completions", '"max_tokens":1,', '"max_tokens":%d,'},
  messages = {"overhead_request_messages.json", "/v1/messages", '"max_tokens":1,', '"max_tokens":%d,'},
  responses = {"overhead_request_responses.json", "/v1/responses", '"max_output_tokens":16,',
               '"max_output_tokens":%d,'},
}
local this = assert(apis[api], "API is chat, messages or responses, not " .. api)
local file = assert(io.open(here .. this[1], "rb"))
local base = file:read("*a"):gsub("%s+$", "")
file:close()

local tokens = tonumber(os.getenv("TOKENS") or "256")
local at, last = base:find(this[3], 1, true)
assert(at, this[1] .. " no longer holds " .. this[3])
local body = base:sub(1, at - 1) .. string.format(this[4], tokens) .. '"stream":true,' ..
             base:sub(last + 1)

wrk.method = "POST"
wrk.path = this[2]
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

done = dofile(here .. "pgbench_line.lua")(#body)
