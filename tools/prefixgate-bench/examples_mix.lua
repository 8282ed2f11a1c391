-- wrk script: the bundled example prompts (examples/prompts/*.json: chats with tools and
-- volatile system prompts, a Messages agent, a Responses agent, a legacy completion) in turn,
-- their model set to the bench engine's and their answers cut to one token. A mix of real-looking
-- requests that the profile-guided build's training (pgo_train.sh) does not send, to measure it
-- on traffic it was not trained on:
--   tools/prefixgate-bench/cpu_split.sh RELEASE_BIN PGO_BIN  with  LUA=.../examples_mix.lua
-- done() prints the PGBENCH line (pgbench_line.lua).
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local prompts = here .. "../../examples/prompts/"
local names = {"agent-tools-v1.json", "agent-tools-v2.json", "claude-agent.json",
               "clean-assistant.json", "completion.json", "daily-digest.json",
               "hourly-report.json", "responses-agent.json", "support-agent.json",
               "system-prompt-v1.json", "system-prompt-v2.json"}
local reqs = {}
for _, n in ipairs(names) do
  local f = assert(io.open(prompts .. n, "rb"))
  local b = f:read("*a")
  f:close()
  b = b:gsub('"model":%s*"[^"]*"', '"model": "builtin:tiny"', 1)
  b = b:gsub('"max_tokens":%s*%d+', '"max_tokens": 1')
  b = b:gsub('"max_output_tokens":%s*%d+', '"max_output_tokens": 1')
  local path = "/v1/chat/completions"
  if n == "responses-agent.json" then path = "/v1/responses"
  elseif n == "completion.json" then path = "/v1/completions"
  elseif n == "claude-agent.json" then path = "/v1/messages" end
  if path ~= "/v1/responses" and not b:find('"max_tokens"', 1, true) then  -- answers of 1 token
    b = b:gsub("^%s*{", '{"max_tokens": 1, ', 1)
  end
  reqs[#reqs + 1] = {path, b}
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local i = 0
function request()
  i = i + 1
  local r = reqs[i % #reqs + 1]
  return wrk.format(nil, r[1], nil, r[2])
end
done = dofile(here .. "pgbench_line.lua")()

