// The official OpenAI SDK (npm `openai`) as a client of the gateway: only the base URL changes.
// Usage: node openai_sdk_client.mjs http://127.0.0.1:PORT/v1
// Prints a JSON summary; exits non-zero on any failure (tests/gateway_server/openai_sdk_test.cpp).
import OpenAI from 'openai';

import { sdkSteps } from './sdk_steps.mjs';

const baseURL = process.argv[2];
if (!baseURL) {
  console.error('usage: node openai_sdk_client.mjs BASE_URL');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const model = 'builtin:tiny';
const { check, step, finish } = sdkSteps();

await step('chat', async () => {
  const { data: r, response } = await client.chat.completions
    .create({
      model,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello from the SDK' },
      ],
      max_tokens: 8,
      temperature: 0,
    })
    .withResponse();
  check(r.object === 'chat.completion', `chat: object ${r.object}`);
  check(typeof r.id === 'string' && r.id.length > 0, 'chat: id');
  check(r.choices.length === 1, 'chat: one choice');
  check(typeof r.choices[0].message.content === 'string', 'chat: content is a string');
  check(typeof r.choices[0].finish_reason === 'string', 'chat: finish_reason');
  check(r.usage && r.usage.prompt_tokens > 0, 'chat: usage.prompt_tokens');
  const replica = response.headers.get('x-prefixgate-replica');
  check(replica && replica !== 'none', `chat: x-prefixgate-replica ${replica}`);
  return { replica, finish_reason: r.choices[0].finish_reason, usage: r.usage };
});

await step('chat_stream', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Stream through the SDK' }],
    max_tokens: 12,
    temperature: 0,
    stream: true,
  });
  let text = '';
  let chunks = 0;
  let finish = null;
  for await (const chunk of stream) {
    check(chunk.object === 'chat.completion.chunk', `stream: object ${chunk.object}`);
    chunks++;
    for (const c of chunk.choices) {
      if (c.delta && typeof c.delta.content === 'string') text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(chunks >= 2, `stream: ${chunks} chunks`);
  check(finish !== null, 'stream: no finish_reason');
  return { chunks, chars: text.length, finish_reason: finish };
});

await step('chat_stream_usage', async () => {
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'Stream with usage' }],
    max_tokens: 6,
    stream: true,
    stream_options: { include_usage: true },
  });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  check(usage && usage.prompt_tokens > 0, 'stream usage: usage chunk missing');
  return { usage };
});

await step('tools', async () => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
          required: ['city'],
        },
      },
    },
    {
      type: 'function',
      function: {
        name: 'add',
        description: 'Adds two numbers',
        parameters: {
          type: 'object',
          properties: { b: { type: 'number' }, a: { type: 'number' } },
          required: ['a', 'b'],
        },
      },
    },
  ];
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools,
    tool_choice: 'auto',
    max_tokens: 8,
  });
  check(r.object === 'chat.completion', `tools: object ${r.object}`);
  check(r.choices.length === 1 && r.choices[0].message.role === 'assistant', 'tools: message');
  const calls = r.choices[0].message.tool_calls;
  check(calls === undefined || calls === null || Array.isArray(calls), 'tools: tool_calls shape');
  check(r.usage && r.usage.prompt_tokens > 0, 'tools: usage.prompt_tokens');
  return { finish_reason: r.choices[0].finish_reason, prompt_tokens: r.usage.prompt_tokens };
});

await step('completion', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6 });
  check(r.object === 'text_completion', `completion: object ${r.object}`);
  check(r.choices.length === 1 && typeof r.choices[0].text === 'string', 'completion: text');
  check(r.usage && r.usage.prompt_tokens > 0, 'completion: usage');
  return { finish_reason: r.choices[0].finish_reason, usage: r.usage };
});

await step('models', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  check(ids.includes(model), `models: ${JSON.stringify(ids)}`);
  return { ids };
});

await step('bad_request', async () => {
  try {
    await client.chat.completions.create({ model, messages: 'not an array' });
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `bad_request: ${e && e.constructor.name}`);
    return { status: e.status };
  }
  check(false, 'bad_request: accepted');
  return null;
});

finish();
