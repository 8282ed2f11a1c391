-- wrk script for pgo_train.sh: the request shapes the gateway serves besides the plain chat that
-- overhead_request.lua and overhead_agent.lua send, in turn, so that a profile-guided build
-- (scripts/build-pgo.sh) learns their paths too: a streamed chat with its usage chunk, an
-- Anthropic Messages request with a system prompt and tools, an OpenAI Responses request with
-- instructions and a tool, a legacy completion, and a chat whose system prompt carries a
-- timestamp that canonicalization rounds. Each request's last user text is new (a counter), as
-- real traffic's is. done() prints the PGBENCH line (pgbench_line.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local file = assert(io.open(here .. "overhead_request.json", "rb"))
local chat = file:read("*a"):gsub("%s+$", "")
file:close()

local tool_schema = '{"type":"object","properties":{"order_id":{"type":"string",' ..
                    '"description":"Order number such as NW-12345"},"include_items":' ..
                    '{"type":"boolean"}},"required":["order_id"]}'
local system = "You are the support assistant of an outdoor gear shop. Answer briefly, look " ..
               "orders up before you answer questions about them, and open a ticket when a " ..
               "customer asks for a person."

local shapes = {
  function(n)
    local body = chat:gsub("}%s*$", ',"stream":true,"stream_options":{"include_usage":true}}')
    return "/v1/chat/completions", body:gsub('"content":"Hi!', '"content":"Hi (' .. n .. ')!', 1)
  end,
  function(n)
    return "/v1/messages", '{"model":"builtin:tiny","max_tokens":1,"system":"' .. system ..
           '","tools":[{"name":"lookup_order","description":"Fetch an order.","input_schema":' ..
           tool_schema .. '}],"messages":[{"role":"user","content":[{"type":"text","text":' ..
           '"Where is order NW-' .. n .. '?"}]}]}'
  end,
  function(n)
    return "/v1/responses", '{"model":"builtin:tiny","max_output_tokens":1,"instructions":"' ..
           system .. '","tools":[{"type":"function","name":"lookup_order","description":' ..
           '"Fetch an order.","parameters":' .. tool_schema .. '}],"input":"Where is order NW-' ..
           n .. '?"}'
  end,
  function(n)
    return "/v1/completions", '{"model":"builtin:tiny","max_tokens":1,"prompt":"' .. system ..
           ' Customer ' .. n .. ': where is my order?"}'
  end,
  function(n)
    return "/v1/chat/completions", '{"model":"builtin:tiny","max_tokens":1,"messages":[' ..
           '{"role":"system","content":"' .. system .. ' The time is 2026-12-05T10:' ..
           string.format("%02d:%02d", n % 60, (n * 7) % 60) .. 'Z."},{"role":"user",' ..
           '"content":"Question ' .. n .. ': do you ship abroad?"}]}'
  end,
}

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local counter = 0
function request()
  counter = counter + 1
  local path, body = shapes[counter % #shapes + 1](counter)
  return wrk.format(nil, path, nil, body)
end

done = dofile(here .. "pgbench_line.lua")()

