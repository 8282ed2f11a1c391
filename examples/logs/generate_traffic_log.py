#!/usr/bin/env python3
"""Writes traffic.jsonl: a synthetic day of chat-completions traffic for `prefixlint log`.

Each line is one request as a gateway would log it:

    {"timestamp": "2026-08-20T09:14:03.512Z", "tenant": "acme", "request": {...chat body...}}

Five apps share three tenants. Each app sends the same long system prompt with every request
and runs multi-turn conversations, where each turn resends the earlier history plus the new
user message. Four common prefix breakers are modelled, one per app:

  storefront-chat (acme)    writes the current time, to the second, into its system prompt,
                            so the prompt changes on every request          -> cause "timestamp"
  release-agent   (globex)  builds its tool list from a dict in each of four worker processes;
                            every worker serializes the tools with its own key order and tool
                            order (and a restarted worker picks a new one)   -> "key-order",
                                                                                "tool-order"
  hr-helpdesk     (initech) puts a fresh request UUID into its system prompt -> cause "id"
  docs-qa         (acme)    clean: the system prompt never changes
  sql-copilot     (initech) clean, with tools that are always serialized the same way

Python 3 standard library only; the output is deterministic for a given seed.

    python3 generate_traffic_log.py                  # writes traffic.jsonl next to this file
    python3 generate_traffic_log.py --lines 100 --out /tmp/t.jsonl
"""

import argparse
import datetime as dt
import json
import os
import random
import uuid

SEED = 20260820
DAY_START = dt.datetime(2026, 8, 20, 9, 0, 0, tzinfo=dt.timezone.utc)
WINDOW_SECONDS = 6 * 3600  # sessions start between 09:00 and 15:00 UTC

# --------------------------------------------------------------------------- system prompts

STOREFRONT_SYSTEM = """You are Piper, the shopping assistant on the Acme Outdoor online store.

Current time: {now}

## What you do
- Help customers find products: tents, sleeping bags, backpacks, footwear, clothing and
  camp kitchen gear. Ask about the trip (season, terrain, group size, budget) before you
  recommend anything, unless the customer already said.
- Answer questions about orders, shipping, returns and the Acme Outdoor membership.
- You cannot see payment details and cannot change orders; for changes, direct the customer to
  Account > Orders or to a human agent.

## Product guidance
- Recommend at most three products at a time, each with its name, price and one line on why it
  fits. Prefer products that are in stock.
- For tents, mention the seasonal rating (3-season or 4-season), the packed weight and the
  number of sleeping places.
- For sleeping bags, mention the comfort temperature, not the extreme temperature.
- For footwear, ask about the customer's usual size and whether they have wide feet.
- Never claim a product is waterproof unless its specification says so.

## Shipping and returns
- Standard shipping is free on orders over $75; otherwise it costs $6.95.
- Express shipping costs $14.95 and arrives in 1-2 business days in the contiguous US.
- Returns are accepted within 60 days for unused items and within 1 year for members.
- Items damaged by use are covered by the manufacturer's warranty, not by the return policy.
- Gift cards and clearance items marked "final sale" cannot be returned.

## Membership
- Acme Outdoor membership costs $30 once, for life.
- Members get a 10% annual dividend on full-price purchases and extended returns.
- Members can rent gear at member prices from the store in their region.

## Style
- Warm, practical and brief; no more than 120 words unless the customer asks for detail.
- Use bullet points for product lists.
- Never pressure the customer to buy; it is fine to say that a cheaper option is enough.
- If you do not know something, say so and offer to connect the customer with a store expert.
"""

RELEASE_SYSTEM = """You are Relay, a release engineering agent for the Globex platform team. You help
engineers find the state of builds and deployments, open tracking issues and roll back bad
releases. You work through tools; you never make up build numbers, versions or statuses.

## How to work
1. Restate the goal in one sentence before calling tools.
2. Prefer read-only tools (search_builds, get_deployment, get_service_health) before any tool
   that changes state.
3. Before calling rollback_deployment, confirm the target version with the user, unless the user
   has already named it explicitly.
4. After a state-changing call, report what changed and how to verify it.
5. When several services are involved, handle them one at a time and summarise at the end.

## Environments
- dev: deploys on every merge to main; anyone can roll back.
- staging: deploys nightly; used for load tests; roll back only with the owning team's consent.
- prod: deploys after a manual approval; rollbacks need a reason and notify the on-call channel.

## Reading health data
- Error rate above 1% for more than 5 minutes after a deploy is a strong sign of a bad release.
- p99 latency that doubles after a deploy is a warning; check the dependency graph first.
- 5xx errors from a single pod point to an infrastructure issue, not to the release.

## Rules
- Never expose secrets from build logs; replace them with [redacted].
- If a tool returns an error, show the error message and stop; do not retry more than once.
- Keep answers short: the result first, then at most three lines of detail.
"""

HR_SYSTEM = """You are Juniper, the HR helpdesk assistant for Initech employees in the United States.

Request ID: {request_id}

## Scope
You answer questions about paid time off, benefits enrolment, payroll dates, parental leave,
expense policy, the employee handbook and internal mobility. You do not handle performance
reviews, disciplinary matters or medical details; for those, direct the employee to their
HR business partner.

## Paid time off
- Full-time employees accrue 1.67 days of PTO per month (20 days per year).
- Up to 5 unused days carry over into the next year; the rest is forfeited.
- PTO requests go through the Workday app: Time Off > Request Time Off.
- Managers should approve or decline within 3 business days.
- Company holidays are listed in the handbook and do not count against PTO.

## Benefits
- Medical, dental and vision plans are offered through two carriers; enrolment is open during
  the annual open enrolment period or within 30 days of a qualifying life event.
- The 401(k) plan matches 100% of the first 4% of salary contributed, vesting immediately.
- The wellness stipend is $600 per year, reimbursed through the expense tool.
- Commuter benefits are pre-tax up to the federal monthly limit.

## Parental leave
- Birth parents receive 16 weeks of fully paid leave; non-birth parents receive 12 weeks.
- Leave can be taken within 12 months of the birth or adoption, in up to two blocks.
- Employees should tell their manager and HR at least 30 days in advance when possible.

## Expenses
- Submit expenses within 60 days with an itemised receipt for anything over $25.
- Meals while travelling: up to $75 per day; alcohol is not reimbursed.
- Home office equipment: up to $500 once every three years, with manager approval.

## Payroll
- Employees are paid semi-monthly, on the 15th and the last business day of the month.
- Pay statements are in Workday under Pay > Payslips.
- Changes to direct deposit made after the 10th take effect the following pay period.

## How to answer
- Quote the policy section you rely on, in one line, then answer.
- If the policy is ambiguous or the question involves an exception, say so and suggest
  contacting HR at hr-help@initech.example or by phone at +1 (512) 555-0188.
- Keep answers under 150 words. Be kind; many questions come at stressful moments.
- Never ask for social security numbers, bank details or health information.
"""

DOCS_SYSTEM = """You are the documentation assistant for Acme Cloud Storage (ACS), answering developer
questions about the ACS REST API, the SDKs and the command-line tool.

## Sources
Answer only from the documentation summarised below. If the answer is not covered, say that it
is not documented and suggest opening a support case from the developer console.

## API overview
- Base URL: https://api.acs.example/v3. API version 3 is current; version 2 was retired in 2025.
- Authentication: a bearer API key in the Authorization header. Keys are created in the
  developer console under Settings > API keys and can be scoped to read, write or admin.
- All responses are JSON. Timestamps in responses are RFC 3339 strings in UTC.
- Pagination: list endpoints return at most 100 items and a next_cursor field; pass it as the
  cursor query parameter to fetch the next page. An absent next_cursor means the last page.

## Errors
- 400: the request body or a parameter is invalid; the error.param field names it.
- 401: the key is missing, expired or revoked.
- 403: the key's scope does not allow the operation.
- 404: the bucket or object does not exist, or the key cannot see it.
- 409: a bucket with that name already exists in the account.
- 412: a precondition header (If-Match) did not match the object's current ETag.
- 429: rate limited. Limits are 600 requests per minute per key for reads and 120 for writes.
  Honour the Retry-After header.
- 500 and 503: transient errors; retry with exponential backoff, at most 5 attempts.

## Buckets and objects
- Bucket names are 3 to 63 characters: lowercase letters, digits and hyphens.
- Objects up to 5 GB can be uploaded in one PUT; larger objects need a multipart upload with
  parts of 8 MB to 512 MB, at most 10,000 parts.
- Object versioning is off by default; enable it per bucket with PATCH /buckets/{name}.
- Lifecycle rules can move objects to the archive tier after a number of days or delete them.
- Presigned URLs are valid for 1 second to 7 days; the default is 1 hour.

## SDKs and tools
- Python SDK acs-sdk 4.2.0 supports Python 3.9 to Python 3.12: pip install acs-sdk.
- JavaScript SDK @acs/client 2.7.1 supports Node 18 and newer.
- Go SDK: go get github.com/acs-example/acs-go/v3 (Go 1.21 or newer).
- CLI: acs 1.14.0; configure it with acs configure and a key with admin scope for bucket
  management.
- All SDKs retry 429, 500 and 503 responses automatically up to 3 times.

## Pricing for developers
- Storage: $0.020 per GB-month in the standard tier and $0.004 in the archive tier.
- Egress: the first 100 GB per month are free, then $0.05 per GB.
- Requests: $0.40 per million reads and $4.50 per million writes.

## How to answer
- Give the shortest correct answer first, then a code example in the language the developer
  uses (default: Python). Keep examples under 20 lines.
- Use placeholders such as YOUR_API_KEY and my-bucket; never a real-looking key.
- Mention the relevant error code when the question is about a failure.
- Do not speculate about unreleased features or future pricing.
"""

SQL_SYSTEM = """You are Query, a SQL assistant embedded in Initech's analytics workbench. Analysts ask
questions in plain English about the sales warehouse; you answer with one PostgreSQL 15 query
and a short explanation.

## Schema (schema "sales")
- customers(customer_id bigint pk, name text, segment text, region text, created_at timestamptz)
- orders(order_id bigint pk, customer_id bigint fk, ordered_at timestamptz, status text,
  channel text)   -- status in ('placed','shipped','delivered','returned','cancelled')
- order_items(order_id bigint fk, product_id bigint fk, quantity int, unit_price numeric(10,2),
  discount numeric(4,3))
- products(product_id bigint pk, sku text, name text, category text, list_price numeric(10,2))
- regions(region text pk, country text, sales_lead text)

## Rules
1. Use only the tables and columns listed above; if the question needs other data, say so.
2. Revenue is sum(quantity * unit_price * (1 - discount)) over orders that are not cancelled.
3. Always qualify tables with the schema and use explicit JOIN ... ON clauses.
4. Use date_trunc for period grouping and compare timestamps with half-open ranges.
5. Limit exploratory queries to 100 rows unless the analyst asks for everything.
6. Never write INSERT, UPDATE, DELETE or DDL; the workbench connection is read-only anyway.
7. When the question is ambiguous (e.g. "last quarter" for a fiscal year), state the assumption.
8. Use run_query only when the analyst asks to see results, and describe_table when you are unsure
   of a column's contents.

## Output format
- First the SQL in a fenced code block, then at most four lines of explanation.
- Name output columns in snake_case.
"""

# --------------------------------------------------------------------------- tools


def fn(name, description, properties, required):
    return {"type": "function",
            "function": {"name": name, "description": description,
                         "parameters": {"type": "object", "properties": properties,
                                        "required": required}}}


ENVS = {"type": "string", "enum": ["dev", "staging", "prod"], "description": "Target environment."}

RELEASE_TOOLS = [
    fn("search_builds", "Search CI builds by service and branch, newest first.",
       {"service": {"type": "string", "description": "Service name, e.g. checkout-api."},
        "branch": {"type": "string", "description": "Git branch.", "default": "main"},
        "status": {"type": "string", "enum": ["passed", "failed", "running"],
                   "description": "Only builds with this status."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50,
                  "description": "How many builds to return."}},
       ["service"]),
    fn("get_deployment", "Return the version deployed for a service in an environment, "
       "with the recent deploy history.",
       {"service": {"type": "string", "description": "Service name."}, "environment": ENVS},
       ["service", "environment"]),
    fn("get_service_health", "Return error rate, p50/p99 latency and saturation for a service "
       "over a recent window.",
       {"service": {"type": "string", "description": "Service name."}, "environment": ENVS,
        "window_minutes": {"type": "integer", "minimum": 5, "maximum": 1440,
                           "description": "Length of the window to aggregate."}},
       ["service", "environment"]),
    fn("rollback_deployment", "Roll a service in an environment back to an earlier version.",
       {"service": {"type": "string", "description": "Service name."}, "environment": ENVS,
        "version": {"type": "string", "description": "Version to roll back to, e.g. v3.14.2."},
        "reason": {"type": "string", "description": "Why; required for prod."}},
       ["service", "environment", "version"]),
    fn("create_issue", "Open a tracking issue in the owning team's issue tracker.",
       {"title": {"type": "string", "description": "Short summary."},
        "body": {"type": "string", "description": "Markdown description."},
        "labels": {"type": "array", "items": {"type": "string"},
                   "description": "Labels to apply."}},
       ["title", "body"]),
]

SQL_TOOLS = [
    fn("run_query", "Run a read-only SQL query on the sales warehouse and return up to 100 rows.",
       {"sql": {"type": "string", "description": "One PostgreSQL SELECT statement."}},
       ["sql"]),
    fn("describe_table", "Return the columns of a table with their types and ten sample values.",
       {"table": {"type": "string", "description": "Table name, schema-qualified."}},
       ["table"]),
]

# --------------------------------------------------------------------------- conversation content

STOREFRONT_TURNS = [
    ["I'm planning a 3-night trip in the Cascades in late September. Which tent would you suggest for two people?",
     "Is the lighter one OK if it rains a lot?",
     "And a sleeping bag to go with it? I get cold easily.",
     "Can I return the bag if it's too warm?"],
    ["Where is my order? It says shipped but the tracking hasn't moved.",
     "It's been four days. Can you send a replacement?"],
    ["What's the difference between the Ridgeline 45 and the Ridgeline 60 backpacks?",
     "I mostly do weekend trips. Which one?",
     "Does it fit a 3-liter water bladder?"],
    ["Is the membership worth it if I only buy a few things a year?",
     "How does the dividend work exactly?"],
    ["Do you have trail runners in wide sizes?",
     "I'm usually a 10.5 wide. Anything waterproof?",
     "How does express shipping work to Denver?"],
    ["Can I rent a 4-season tent instead of buying one?"],
    ["My stove arrived with a bent burner. What should I do?",
     "I threw away the box, is that a problem?"],
    ["I need a gift for my dad who likes fishing, around $50. Ideas?",
     "Can you gift-wrap it?"],
]

STOREFRONT_REPLIES = [
    "For two people in the Cascades in late September I'd look at a 3-season, 2-person tent with a full-coverage fly:\n- Trailhead 2 ($249): 1.9 kg packed, two doors, strong in wind.\n- Skyline UL 2 ($379): 1.2 kg, lighter but a thinner floor.\n- Basecamp 3 ($299): roomier if you want space for gear.",
    "It will handle rain well as long as you pitch it taut and use the footprint; the thinner floor is the main trade-off, not the fly.",
    "Since you sleep cold, choose a bag with a comfort rating of about -2 C, such as the Cirrus 20 ($229, down) or the Trek 15 synthetic ($149), which stays warmer when damp.",
    "Yes: unused items can be returned within 60 days, and within a year if you're a member.",
    "I'm sorry about the wait. Tracking can pause for a day or two between carrier hubs. I can't create orders myself, but a human agent can check with the carrier and send a replacement.",
    "The Ridgeline 45 suits overnight trips and carry-on travel; the 60 adds a sleeping bag compartment and a stiffer frame for loads above 15 kg.",
    "For weekend trips the Ridgeline 45 is usually enough, unless you carry a bulky winter bag.",
    "Membership costs $30 once and pays a 10% annual dividend on full-price purchases, so it pays for itself after about $300 of purchases, plus you get extended returns.",
    "Yes, several trail runners come in wide: the Switchback 3 Wide ($139) and the Talus Trail Wide ($159). The Talus has a waterproof membrane.",
    "You can rent 4-season tents at member prices from your regional store; non-members can rent too, at standard prices.",
    "Sorry it arrived damaged! Please take a photo of the burner and start a return from Account > Orders; damage in shipping is always covered.",
    "A few ideas around $50: a waterproof tackle organiser ($39), a packable sun hoody ($55) or an insulated bottle with a fishing-fly print ($45).",
]

RELEASE_TASKS = [
    ("checkout-api", "prod", "checkout-api in prod is throwing 500s since the last deploy. What version is live and what was the one before?"),
    ("search-indexer", "staging", "Did the nightly search-indexer deploy to staging go through?"),
    ("payments-gateway", "prod", "payments-gateway p99 doubled an hour ago. Was there a deploy?"),
    ("user-profile", "dev", "Find the last failed build of user-profile on main and tell me why it failed."),
    ("notifications", "prod", "Roll notifications in prod back to v2.31.4, the new version drops emails."),
    ("inventory-sync", "staging", "Is inventory-sync healthy in staging? Load test starts soon."),
]

RELEASE_FOLLOWUPS = [
    "OK, roll it back to the previous version, reason: elevated 500s after deploy.",
    "Open an issue for the owning team with what you found.",
    "Check the health again for the last 15 minutes.",
    "Thanks. Anything else deployed around the same time?",
]

HR_QUESTIONS = [
    ["How many PTO days can I carry over into next year?", "And if I have 8 left, what happens to the other 3?"],
    ["My partner is expecting in January. How much parental leave do I get as the non-birth parent?",
     "Can I split it into two blocks?", "Who do I tell first, my manager or HR?"],
    ["Can I expense a standing desk for my home office?", "It costs $640. Is any of it covered?"],
    ["When is the next payday?"],
    ["I just got married. Can I add my spouse to my medical plan now?", "What documents do I need?"],
    ["Is the gym membership covered by the wellness stipend?"],
    ["How does the 401(k) match work?", "Is there a vesting period?"],
    ["I changed my direct deposit on the 12th. Will my next paycheck go to the new account?"],
]

HR_REPLIES = [
    "Per the PTO policy (carry-over): up to 5 unused days carry over into the next year; any days beyond that are forfeited at year end.",
    "Per the parental leave policy: non-birth parents receive 12 weeks of fully paid leave, usable within 12 months of the birth.",
    "Per the expense policy (home office): equipment up to $500 once every three years is reimbursable with your manager's approval.",
    "Per the payroll policy: you're paid on the 15th and on the last business day of each month.",
    "Marriage is a qualifying life event, so you can add your spouse within 30 days of the wedding.",
    "The $600 wellness stipend can be used for gym memberships; submit the receipt through the expense tool.",
    "The 401(k) plan matches 100% of the first 4% of your salary that you contribute.",
    "Per the payroll policy: changes made after the 10th take effect the following pay period, so this paycheck goes to your old account.",
]

DOCS_QUESTIONS = [
    ["How do I list all objects in a bucket when there are more than 100?",
     "Can you show that with the JavaScript SDK instead?"],
    ["I'm getting 412 Precondition Failed on PUT. What does that mean?",
     "How do I get the current ETag first?"],
    ["What's the largest file I can upload in one request?",
     "Show me a multipart upload in Python.", "What part size would you pick for a 40 GB file?"],
    ["Why does my key get 403 when creating a bucket?"],
    ["How long can a presigned URL last?", "Can I make one from the CLI?"],
    ["We keep hitting 429 during a nightly backfill. What are the limits?",
     "Does the Python SDK retry on its own?"],
    ["How much does it cost to store 2 TB in the archive tier?"],
    ["How do I turn on versioning for a bucket?"],
]

DOCS_REPLIES = [
    "List endpoints return at most 100 items plus a next_cursor; keep passing it as cursor until it is absent.\n\n```python\nfrom acs import Client\nclient = Client(api_key=\"YOUR_API_KEY\")\ncursor = None\nwhile True:\n    page = client.objects.list(\"my-bucket\", cursor=cursor)\n    for obj in page.items:\n        print(obj.key)\n    cursor = page.next_cursor\n    if not cursor:\n        break\n```",
    "412 means the If-Match header you sent doesn't match the object's current ETag, i.e. the object changed since you read it.",
    "A single PUT accepts objects up to 5 GB; anything larger needs a multipart upload (8 MB to 512 MB parts, at most 10,000 parts).",
    "403 means the key's scope doesn't allow the operation: bucket creation needs a key with admin scope.",
    "Presigned URLs are valid from 1 second to 7 days; the default is 1 hour.",
    "Limits are 600 requests per minute per key for reads and 120 for writes; on 429, wait for the Retry-After header before retrying.",
    "2 TB is 2,048 GB; at $0.004 per GB-month in the archive tier that is about $8.19 per month, plus request and egress charges.",
    "Send PATCH /buckets/{name} with {\"versioning\": true}; it's off by default.",
]

SQL_QUESTIONS = [
    ["Revenue by region for last month.", "Now split it by channel as well."],
    ["Top 10 products by units sold this year.", "Only in the Outdoor category."],
    ["How many customers placed their first order in Q2?"],
    ["What's the return rate by product category?", "Run it and show me the results."],
    ["Average order value per segment, monthly, for 2026."],
    ["Which sales lead's region grew the most quarter over quarter?"],
]

SQL_REPLIES = [
    "```sql\nSELECT c.region, sum(oi.quantity * oi.unit_price * (1 - oi.discount)) AS revenue\nFROM sales.orders o\nJOIN sales.order_items oi ON oi.order_id = o.order_id\nJOIN sales.customers c ON c.customer_id = o.customer_id\nWHERE o.status <> 'cancelled'\n  AND o.ordered_at >= date_trunc('month', now()) - interval '1 month'\n  AND o.ordered_at < date_trunc('month', now())\nGROUP BY c.region\nORDER BY revenue DESC;\n```\nRevenue follows the standard definition and excludes cancelled orders.",
    "```sql\nSELECT p.name, sum(oi.quantity) AS units_sold\nFROM sales.order_items oi\nJOIN sales.orders o ON o.order_id = oi.order_id\nJOIN sales.products p ON p.product_id = oi.product_id\nWHERE o.status <> 'cancelled' AND o.ordered_at >= date_trunc('year', now())\nGROUP BY p.name\nORDER BY units_sold DESC\nLIMIT 10;\n```",
    "```sql\nSELECT count(*) AS new_customers\nFROM (SELECT customer_id, min(ordered_at) AS first_order FROM sales.orders GROUP BY customer_id) f\nWHERE f.first_order >= date_trunc('year', now()) + interval '3 months'\n  AND f.first_order < date_trunc('year', now()) + interval '6 months';\n```\nAssumes calendar quarters.",
    "```sql\nSELECT p.category,\n       avg((o.status = 'returned')::int) AS return_rate\nFROM sales.orders o\nJOIN sales.order_items oi ON oi.order_id = o.order_id\nJOIN sales.products p ON p.product_id = oi.product_id\nWHERE o.status <> 'cancelled'\nGROUP BY p.category\nORDER BY return_rate DESC;\n```",
]

# --------------------------------------------------------------------------- helpers


def iso_ms(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def iso_s(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def shuffled_keys(value, rng):
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled_keys(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled_keys(v, rng) for v in value]
    return value


class Worker:
    """A release-agent worker process: its tool serialization is fixed until it restarts."""

    def __init__(self, rng):
        self.restart(rng)

    def restart(self, rng):
        order = list(range(len(RELEASE_TOOLS)))
        rng.shuffle(order)
        self.tools = [shuffled_keys(RELEASE_TOOLS[i], rng) for i in order]
        self.requests_left = rng.randint(8, 30)

    def serialize_tools(self, rng):
        self.requests_left -= 1
        if self.requests_left <= 0:
            self.restart(rng)
        return self.tools


def call_id(rng):
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "call_" + "".join(rng.choice(alphabet) for _ in range(24))


# --------------------------------------------------------------------------- sessions
# A session yields (seconds after its start, tenant, request body) for each turn.


def storefront_session(rng):
    turns = rng.choice(STOREFRONT_TURNS)
    user_id = "shopper-%05d" % rng.randint(1, 99999)
    history, t, out = [], 0.0, []
    for i, question in enumerate(turns):
        history.append({"role": "user", "content": question})
        out.append((t, "acme", lambda now, h=list(history): {
            "model": "llama-3-8b-instruct",
            "messages": [{"role": "system", "content": STOREFRONT_SYSTEM.format(now=iso_s(now))}] + h,
            "temperature": 0.6, "max_tokens": 400, "stream": True, "user": user_id}))
        history.append({"role": "assistant", "content": rng.choice(STOREFRONT_REPLIES)})
        t += rng.uniform(15, 150)
    return out


def release_session(rng, workers):
    service, env, ask = rng.choice(RELEASE_TASKS)
    followups = rng.sample(RELEASE_FOLLOWUPS, rng.randint(0, 2))
    history, t, out = [{"role": "user", "content": ask}], 0.0, []

    def body(h):
        tools = rng.choice(workers).serialize_tools(rng)
        return {"model": "llama-3-70b-instruct", "messages": [{"role": "system", "content": RELEASE_SYSTEM}] + h,
                "tools": tools, "tool_choice": "auto", "temperature": 0}

    for step, question in enumerate([None] + followups):
        if question is not None:
            history.append({"role": "user", "content": question})
        out.append((t, "globex", body(list(history))))
        # The model calls a tool; the agent sends the tool result back in the next request.
        cid = call_id(rng)
        tool = "get_deployment" if step == 0 else rng.choice(["get_service_health", "rollback_deployment", "create_issue"])
        args = {"service": service, "environment": env}
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}]})
        result = {"service": service, "environment": env, "version": "v%d.%d.%d" % (rng.randint(1, 4), rng.randint(0, 40), rng.randint(0, 9)),
                  "previous_version": "v%d.%d.%d" % (rng.randint(1, 4), rng.randint(0, 40), rng.randint(0, 9)),
                  "error_rate_percent": round(rng.uniform(0.1, 4.0), 2), "status": "ok"}
        history.append({"role": "tool", "tool_call_id": cid, "content": json.dumps(result)})
        t += rng.uniform(2, 8)
        out.append((t, "globex", body(list(history))))
        history.append({"role": "assistant", "content": "%s in %s runs %s; error rate %.2f%% over the window." % (
            service, env, result["version"], result["error_rate_percent"])})
        t += rng.uniform(20, 120)
    return out


def hr_session(rng):
    turns = rng.choice(HR_QUESTIONS)
    history, t, out = [], 0.0, []
    for question in turns:
        history.append({"role": "user", "content": question})
        request_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        out.append((t, "initech", {
            "model": "llama-3-8b-instruct",
            "messages": [{"role": "system", "content": HR_SYSTEM.format(request_id=request_id)}] + list(history),
            "temperature": 0.3, "max_tokens": 300}))
        history.append({"role": "assistant", "content": rng.choice(HR_REPLIES)})
        t += rng.uniform(20, 200)
    return out


def docs_session(rng):
    turns = rng.choice(DOCS_QUESTIONS)
    history, t, out = [], 0.0, []
    for question in turns:
        history.append({"role": "user", "content": question})
        out.append((t, "acme", {
            "model": "llama-3-8b-instruct",
            "messages": [{"role": "system", "content": DOCS_SYSTEM}] + list(history),
            "temperature": 0.2, "max_tokens": 600, "stream": True}))
        history.append({"role": "assistant", "content": rng.choice(DOCS_REPLIES)})
        t += rng.uniform(30, 240)
    return out


def sql_session(rng):
    turns = rng.choice(SQL_QUESTIONS)
    history, t, out = [], 0.0, []
    for question in turns:
        history.append({"role": "user", "content": question})
        out.append((t, "initech", {
            "model": "llama-3-8b-instruct",
            "messages": [{"role": "system", "content": SQL_SYSTEM}] + list(history),
            "tools": SQL_TOOLS, "temperature": 0, "max_tokens": 500}))
        history.append({"role": "assistant", "content": rng.choice(SQL_REPLIES)})
        t += rng.uniform(30, 300)
    return out


# --------------------------------------------------------------------------- main


def generate(lines, seed):
    rng = random.Random(seed)
    workers = [Worker(rng) for _ in range(4)]
    apps = [(storefront_session, 0.28), (lambda r: release_session(r, workers), 0.10),
            (hr_session, 0.22), (docs_session, 0.24), (sql_session, 0.16)]
    events = []
    while len(events) < lines * 1.1:
        make = rng.choices([a for a, _ in apps], weights=[w for _, w in apps])[0]
        start = DAY_START + dt.timedelta(seconds=rng.uniform(0, WINDOW_SECONDS))
        for offset, tenant, body in make(rng):
            when = start + dt.timedelta(seconds=offset, microseconds=rng.randint(0, 999) * 1000)
            events.append((when, tenant, body))
    events.sort(key=lambda e: e[0])
    records = []
    for when, tenant, body in events[:lines]:
        if callable(body):  # bodies that embed the request time are built when it is known
            body = body(when)
        records.append({"timestamp": iso_ms(when), "tenant": tenant, "request": body})
    return records


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(here, "traffic.jsonl"))
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    records = generate(args.lines, args.seed)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    print("wrote %d requests to %s" % (len(records), args.out))


if __name__ == "__main__":
    main()
