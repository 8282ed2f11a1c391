-- wrk script for bench/overhead.sh: every connection sends the same realistic chat completion
-- (a ~2 KB system prompt, two tools, a user message, max_tokens 1), and done() prints one
-- machine-readable line that overhead.sh parses:
--   PGBENCH requests=N duration_us=N errors=N non2xx=N rps=F p50_us=N p90_us=N p99_us=N
-- Latencies are wrk's own (microseconds, from the request write to the last response byte).

local system_prompt = table.concat({
  "You are Atlas, the support assistant of Northwind Outfitters, an online shop for hiking and ",
  "camping gear. Answer in the customer's language, in a friendly and concise tone, and never ",
  "invent order data: look it up with the tools provided. Policies you must follow: ",
  "(1) Returns are accepted within 30 days of delivery for unused items in their original ",
  "packaging; worn footwear and opened fuel canisters cannot be returned. Refunds go to the ",
  "original payment method within 5 business days of the return being received at the warehouse. ",
  "(2) Shipping is free above 50 EUR within the EU; express delivery costs 9.90 EUR and ships the ",
  "same day for orders placed before 14:00 CET on business days. (3) Warranty claims for tents, ",
  "backpacks and sleeping bags are handled by the manufacturer for two years; collect the order ",
  "number, a photo of the defect and a short description, then open a ticket with create_ticket. ",
  "(4) Never reveal another customer's data, never change an address after an order has shipped, ",
  "and never promise a delivery date the carrier has not confirmed. (5) If the customer is angry, ",
  "acknowledge the problem first, then offer the concrete next step. (6) Escalate to a human agent ",
  "when a refund above 300 EUR is requested, when the customer asks for a manager, or when you are ",
  "not sure a policy applies. Formatting: plain text, short paragraphs, at most one bulleted list, ",
  "prices with two decimals and the currency after the amount. Product knowledge: our tents are ",
  "rated by season (3-season for spring to autumn, 4-season for snow loads); sleeping bag comfort ",
  "ratings follow EN 13537 / ISO 23537; backpack volumes are in litres and the torso length sizes ",
  "are S (40-45 cm), M (45-50 cm) and L (50-55 cm). Stoves: canister stoves use EN 417 threaded ",
  "canisters; liquid fuel stoves accept white gas and, with the multi-fuel jet, kerosene. ",
  "Store hours for the Hamburg flagship: Monday to Friday 10:00-19:00, Saturday 10:00-18:00. ",
  "Customer service by phone: +49 40 1234 5678, Monday to Friday 09:00-17:00 CET. ",
  "Today is a regular business day. Keep answers under 120 words unless the customer asks for ",
  "details, and end with a question only when you need information to continue.",
})

local body = [[{"model":"builtin:tiny","messages":[{"role":"system","content":"]] .. system_prompt ..
  [["},{"role":"user","content":"Hi! I ordered the Trailhead 45 backpack last week (order NW-20931) and it still hasn't shipped. Can you check what's going on and whether I can switch to express delivery?"}],]] ..
  [["tools":[{"type":"function","function":{"name":"lookup_order","description":"Fetch an order's status, items, shipping method and tracking number.","parameters":{"type":"object","properties":{"order_id":{"type":"string","description":"Order number such as NW-12345"},"include_items":{"type":"boolean"}},"required":["order_id"]}}},]] ..
  [[{"type":"function","function":{"name":"create_ticket","description":"Open a support ticket for a human agent.","parameters":{"type":"object","properties":{"order_id":{"type":"string"},"category":{"type":"string","enum":["shipping","return","warranty","other"]},"summary":{"type":"string"}},"required":["category","summary"]}}}],]] ..
  [["max_tokens":1,"temperature":0}]]

wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    "PGBENCH requests=%d duration_us=%d errors=%d non2xx=%d rps=%.2f p50_us=%d p90_us=%d p99_us=%d body_bytes=%d\n",
    summary.requests, summary.duration, errors, e.status,
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), #body))
end
