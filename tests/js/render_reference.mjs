// Reference chat-template renderings for tests/canonicalize/jinja_parity_test.cpp.
//
//   node render_reference.mjs <cases.json>
//
// cases.json: {"config": "<path to a tokenizer_config.json>",
//              "chat_template": "<optional chat_template.jinja text; wins over the config's>",
//              "requests": [<OpenAI chat request body>, ...]}
// Prints a JSON array with, per request, {"text": "<rendered prompt>"} or {"error": "<message>"}.
//
// Rendering is @huggingface/jinja's, with the context transformers.js's apply_chat_template
// builds: {messages, tools, documents, add_generation_prompt, ...special tokens of the config}.
// Before that, each request's messages are turned into template context the way vLLM's
// chat_utils does for the "string" content format (or "openai" for templates that loop over
// message content), which is what an engine actually renders:
//   - content: a string stays; a list of parts becomes its text parts joined with "\n"
//     ("openai" format: a list of {"type": "text", "text": ...}); null becomes "" ([]);
//   - assistant tool_calls: kept when not null, dropped when empty; each function.arguments
//     JSON string is parsed (to {} when it is not valid JSON);
//   - name (when a string) and tool_call_id (tool messages) are kept; reasoning likewise;
//   - tools: {"type": "function", "function": {"name", "description", "parameters", ...}},
//     as pydantic's model_dump() of vLLM's tool model orders and fills them;
//   - add_generation_prompt: the request's (default true); chat_template_kwargs are merged in.
// strftime_now() sees a fixed clock, 2024-07-26T12:00:00 UTC.
import { readFileSync } from "node:fs";

process.env.TZ = "UTC";
const FIXED_NOW = Date.UTC(2024, 6, 26, 12, 0, 0);
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length ? args : [FIXED_NOW]));
  }
  static now() {
    return FIXED_NOW;
  }
};

const { Template } = await import("@huggingface/jinja");

const SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

function tokenText(value) {
  if (value && typeof value === "object") return value.content ?? null;
  return value ?? null;
}

function selectTemplate(chatTemplate, hasTools) {
  if (typeof chatTemplate === "string") return chatTemplate;
  const named = Object.fromEntries(chatTemplate.map((t) => [t.name, t.template]));
  if (hasTools && "tool_use" in named) return named.tool_use;
  return named.default;
}

function convertContent(content, openaiFormat) {
  if (content === null || content === undefined) return openaiFormat ? [] : "";
  if (typeof content === "string") return openaiFormat ? [{ type: "text", text: content }] : content;
  const texts = content
    .filter((p) => ["text", "refusal", "input_text", "output_text"].includes(p.type))
    .map((p) => (p.type === "refusal" ? p.refusal : p.text))
    .filter((t) => t !== null && t !== undefined);
  return openaiFormat ? texts.map((text) => ({ type: "text", text })) : texts.join("\n");
}

function convertMessage(m, openaiFormat) {
  const out = { role: m.role, content: convertContent(m.content, openaiFormat) };
  if (m.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
    out.tool_calls = m.tool_calls.map((call) => {
      const fn = { ...call.function };
      if (typeof fn.arguments === "string") {
        try {
          fn.arguments = JSON.parse(fn.arguments);
        } catch {
          fn.arguments = {};
        }
      } else if (typeof fn.arguments !== "object" || fn.arguments === null) {
        fn.arguments = {};
      }
      return { ...call, function: fn };
    });
  }
  if (m.role === "assistant" && m.reasoning !== undefined && m.reasoning !== null) {
    out.reasoning = m.reasoning;
    out.reasoning_content = m.reasoning;
  }
  if (m.role === "tool" && "tool_call_id" in m) out.tool_call_id = m.tool_call_id;
  if (typeof m.name === "string") out.name = m.name;
  return out;
}

function convertTool(t) {
  const { name, description = null, parameters = null, ...rest } = t.function;
  const { type = "function", function: _fn, ...toolRest } = t;
  return { type, function: { name, description, parameters, ...rest }, ...toolRest };
}

const [casesPath] = process.argv.slice(2);
if (!casesPath) {
  console.error("usage: node render_reference.mjs <cases.json>");
  process.exit(2);
}
const spec = JSON.parse(readFileSync(casesPath, "utf8"));
const config = JSON.parse(readFileSync(spec.config, "utf8"));
const chatTemplate = spec.chat_template ?? config.chat_template;
const compiled = new Map();
const results = spec.requests.map((body) => {
  try {
    const tools = Array.isArray(body.tools) ? body.tools.map(convertTool) : null;
    const source = selectTemplate(chatTemplate, tools !== null);
    const openaiFormat = spec.content_format === "openai";
    if (!compiled.has(source)) compiled.set(source, new Template(source));
    const context = {
      messages: body.messages.map((m) => convertMessage(m, openaiFormat)),
      add_generation_prompt: body.add_generation_prompt ?? true,
      tools,
      documents: null,
    };
    for (const key of SPECIAL_TOKENS) {
      const text = tokenText(config[key]);
      if (text) context[key] = text;
    }
    Object.assign(context, body.chat_template_kwargs ?? {});
    return { text: compiled.get(source).render(context) };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
});
process.stdout.write(JSON.stringify(results));
