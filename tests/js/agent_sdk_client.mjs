// The official Anthropic SDK (npm `@anthropic-ai/sdk`, messages.create and messages.stream) and
// OpenAI SDK (npm `openai`, responses.create and responses.stream) as clients of prefixgate:
// only the base URL changes. Usage: node agent_sdk_client.mjs http://127.0.0.1:PORT API_KEY MODEL
// Prints a JSON summary; exits non-zero on any failure
// (tests/gateway_server/agent_sdk_test.cpp).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

import { sdkSteps } from './sdk_steps.mjs';

const [origin, apiKey, model] = process.argv.slice(2);
if (!origin || !apiKey || !model) {
  console.error('usage: node agent_sdk_client.mjs ORIGIN API_KEY MODEL');
  process.exit(2);
}
const anthropic = new Anthropic({ baseURL: origin, apiKey, maxRetries: 0, timeout: 60_000 });
const openai = new OpenAI({ baseURL: `${origin}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
const { check, step, finish } = sdkSteps();

// A system prompt of many blocks' worth, declared cacheable.
const systemText = 'You are a careful coding agent. Read before you edit. '.repeat(12);
const system = [{ type: 'text', text: systemText, cache_control: { type: 'ephemeral' } }];
const tools = [
  {
    name: 'read_file',
    description: 'Reads a file of the repository',
    input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  },
  {
    name: 'grep',
    description: 'Searches the repository',
    input_schema: { type: 'object', properties: { pattern: { type: 'string' } } },
    cache_control: { type: 'ephemeral' },
  },
];

function checkUsage(usage, what) {
  for (const k of ['input_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens', 'output_tokens']) {
    check(Number.isInteger(usage[k]) && usage[k] >= 0, `${what}: usage.${k} = ${usage[k]}`);
  }
}

await step('messages_create', async () => {
  const params = { model, max_tokens: 8, system, messages: [{ role: 'user', content: 'Hello from the SDK' }] };
  const first = await anthropic.messages.create(params);
  check(first.type === 'message' && first.role === 'assistant', `create: ${first.type} ${first.role}`);
  check(first.id.startsWith('msg_'), `create: id ${first.id}`);
  check(Array.isArray(first.content) && first.content[0].type === 'text', 'create: a text block');
  check(['end_turn', 'max_tokens', 'stop_sequence'].includes(first.stop_reason), `create: stop_reason ${first.stop_reason}`);
  checkUsage(first.usage, 'create');
  const second = await anthropic.messages.create(params);
  check(second.usage.cache_read_input_tokens > 0, `create: second read ${second.usage.cache_read_input_tokens}`);
  return { id: first.id, first: first.usage, second: second.usage };
});

await step('messages_stream', async () => {
  const stream = anthropic.messages.stream({
    model,
    max_tokens: 12,
    system,
    messages: [{ role: 'user', content: 'Stream through the SDK' }],
  });
  let text = '';
  const events = [];
  stream.on('text', (delta) => {
    text += delta;
  });
  stream.on('streamEvent', (e) => events.push(e.type));
  const message = await stream.finalMessage();
  check(message.content.length >= 1 && message.content[0].text === text, 'stream: text of finalMessage');
  check(message.stop_reason === 'max_tokens', `stream: stop_reason ${message.stop_reason}`);
  check(message.usage.output_tokens === 12, `stream: output_tokens ${message.usage.output_tokens}`);
  check(message.usage.cache_read_input_tokens > 0, `stream: read ${message.usage.cache_read_input_tokens}`);
  checkUsage(message.usage, 'stream');
  check(events[0] === 'message_start' && events.at(-1) === 'message_stop', `stream: events ${events}`);
  return { events: events.length, chars: text.length, usage: message.usage };
});

await step('messages_raw_stream', async () => {
  const stream = await anthropic.messages.create({
    model,
    max_tokens: 4,
    messages: [{ role: 'user', content: 'Raw events' }],
    stream: true,
  });
  const types = [];
  for await (const event of stream) types.push(event.type);
  check(types[0] === 'message_start', `raw: first ${types[0]}`);
  check(types.includes('content_block_delta') && types.includes('message_delta'), `raw: ${types}`);
  return { types };
});

await step('messages_tools', async () => {
  const r = await anthropic.messages.create({
    model,
    max_tokens: 6,
    system,
    tools,
    tool_choice: { type: 'auto' },
    messages: [
      { role: 'user', content: 'Where is the router?' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me search.' },
          { type: 'tool_use', id: 'toolu_01', name: 'grep', input: { pattern: 'route' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_01', content: 'gateway/src/routing.cpp' },
          { type: 'text', text: 'Open it.', cache_control: { type: 'ephemeral' } },
        ],
      },
    ],
  });
  check(r.type === 'message', 'tools: a message');
  checkUsage(r.usage, 'tools');
  const total = r.usage.input_tokens + r.usage.cache_read_input_tokens + r.usage.cache_creation_input_tokens;
  check(r.usage.cache_creation_input_tokens + r.usage.cache_read_input_tokens > 0, 'tools: breakpoints counted');
  return { stop_reason: r.stop_reason, total_input: total, usage: r.usage };
});

await step('messages_errors', async () => {
  const out = {};
  try {
    await anthropic.messages.create({ model, max_tokens: 8, messages: 'not an array' });
    check(false, 'errors: a bad request was accepted');
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError, `errors: 400 as ${e && e.constructor.name}`);
    check(e.error && e.error.error && e.error.error.type === 'invalid_request_error', `errors: ${JSON.stringify(e.error)}`);
    out.bad_request = e.status;
  }
  try {
    const stranger = new Anthropic({ baseURL: origin, apiKey: 'sk-wrong', maxRetries: 0 });
    await stranger.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'x' }] });
    check(false, 'errors: a wrong key was accepted');
  } catch (e) {
    check(e instanceof Anthropic.AuthenticationError, `errors: 401 as ${e && e.constructor.name}`);
    out.unauthorized = e.status;
  }
  return out;
});

await step('responses_create', async () => {
  const params = { model, instructions: systemText, input: 'Hello from the SDK', max_output_tokens: 8 };
  const first = await openai.responses.create(params);
  check(first.object === 'response', `responses: object ${first.object}`);
  check(typeof first.output_text === 'string', 'responses: output_text');
  check(first.usage && first.usage.input_tokens > 0, 'responses: usage.input_tokens');
  const second = await openai.responses.create(params);
  const cached = second.usage.input_tokens_details.cached_tokens;
  check(cached > 0, `responses: second cached_tokens ${cached}`);
  return { status: first.status, cached };
});

await step('responses_stream', async () => {
  const stream = openai.responses.stream({
    model,
    instructions: systemText,
    input: 'Stream the response',
    max_output_tokens: 10,
  });
  let text = '';
  stream.on('response.output_text.delta', (e) => {
    text += e.delta;
  });
  const response = await stream.finalResponse();
  check(response.output_text === text, 'responses stream: output_text equals the deltas');
  check(response.usage.output_tokens === 10, `responses stream: output_tokens ${response.usage.output_tokens}`);
  check(response.usage.input_tokens_details.cached_tokens > 0, 'responses stream: cached tokens');
  return { status: response.status, chars: text.length };
});

await step('responses_function_calls', async () => {
  const stream = await openai.responses.create({
    model,
    instructions: systemText,
    tools: [
      {
        type: 'function',
        name: 'grep',
        description: 'Searches the repository',
        parameters: { type: 'object', properties: { pattern: { type: 'string' } } },
        strict: false,
      },
    ],
    input: [
      { role: 'user', content: 'Where is the router?' },
      { type: 'function_call', call_id: 'call_01', name: 'grep', arguments: '{"pattern":"route"}' },
      { type: 'function_call_output', call_id: 'call_01', output: 'gateway/src/routing.cpp' },
      { role: 'user', content: [{ type: 'input_text', text: 'Open it.' }] },
    ],
    max_output_tokens: 5,
    stream: true,
  });
  const sequence = [];
  let completed = null;
  for await (const event of stream) {
    sequence.push(event.sequence_number);
    if (event.type === 'response.completed' || event.type === 'response.incomplete') completed = event.response;
  }
  check(sequence.every((n, i) => n === i), `function calls: sequence ${sequence}`);
  check(completed && completed.usage.input_tokens > 0, 'function calls: final response with usage');
  return { events: sequence.length, status: completed && completed.status };
});

await step('responses_errors', async () => {
  try {
    await openai.responses.create({ model, input: 'x', previous_response_id: 'resp_123' });
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `responses errors: ${e && e.constructor.name}`);
    check(e.param === 'previous_response_id', `responses errors: param ${e.param}`);
    return { status: e.status };
  }
  check(false, 'responses errors: previous_response_id accepted');
  return null;
});

finish();
