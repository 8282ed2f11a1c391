// The official Anthropic and OpenAI SDKs reading a streamed tool call that the gateway translated
// from a chat replica's stream (tests/gateway_server/upstream_pieces_test.cpp: the replica
// streams two calls, grep and ls, the first's arguments in three pieces). The SDKs assemble each
// call's input from the deltas themselves, as an agent's loop does.
// Usage: node tool_stream_client.mjs http://127.0.0.1:PORT PROMPT
// Prints a JSON summary; exits non-zero on any failure.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

import { sdkSteps } from './sdk_steps.mjs';

const [origin, prompt] = process.argv.slice(2);
if (!origin || !prompt) {
  console.error('usage: node tool_stream_client.mjs ORIGIN PROMPT');
  process.exit(2);
}
const apiKey = 'sk-unused';
const anthropic = new Anthropic({ baseURL: origin, apiKey, maxRetries: 0, timeout: 60_000 });
const openai = new OpenAI({ baseURL: `${origin}/v1`, apiKey, maxRetries: 0, timeout: 60_000 });
const { check, step, finish } = sdkSteps();

// What the replica's two calls carry, whole.
const grepInput = { pattern: 'route\n', path: 'src' };
const grepArguments = '{"pattern": "route\\n", "path": "src"}';
const schema = { type: 'object', properties: { pattern: { type: 'string' }, path: { type: 'string' } } };

await step('messages_tool_stream', async () => {
  const stream = anthropic.messages.stream({
    model: 'm',
    max_tokens: 64,
    tools: [
      { name: 'grep', description: 'Searches the repository', input_schema: schema },
      { name: 'ls', description: 'Lists a folder', input_schema: { type: 'object', properties: {} } },
    ],
    messages: [{ role: 'user', content: prompt }],
  });
  const pieces = [];
  stream.on('inputJson', (partial) => pieces.push(partial));
  const message = await stream.finalMessage();
  const calls = message.content.filter((b) => b.type === 'tool_use');
  check(calls.length === 2, `messages: ${calls.length} tool_use blocks`);
  check(calls[0] && calls[0].name === 'grep' && calls[0].id === 'chatcmpl-tool-a', 'messages: the first call');
  check(calls[0] && JSON.stringify(calls[0].input) === JSON.stringify(grepInput),
    `messages: grep input ${calls[0] && JSON.stringify(calls[0].input)}`);
  check(calls[1] && calls[1].name === 'ls' && JSON.stringify(calls[1].input) === '{}', 'messages: the second call');
  check(pieces.join('') === grepArguments + '{}', `messages: input_json pieces ${JSON.stringify(pieces)}`);
  check(message.stop_reason === 'tool_use', `messages: stop_reason ${message.stop_reason}`);
  check(message.usage.output_tokens === 12, `messages: output_tokens ${message.usage.output_tokens}`);
  return { blocks: message.content.length, pieces: pieces.length };
});

await step('responses_tool_stream', async () => {
  const stream = openai.responses.stream({
    model: 'm',
    max_output_tokens: 64,
    input: prompt,
    tools: [
      { type: 'function', name: 'grep', parameters: schema },
      { type: 'function', name: 'ls', parameters: { type: 'object', properties: {} } },
    ],
  });
  let deltas = '';
  stream.on('response.function_call_arguments.delta', (e) => {
    deltas += e.delta;
  });
  const response = await stream.finalResponse();
  const calls = response.output.filter((item) => item.type === 'function_call');
  check(calls.length === 2, `responses: ${calls.length} function_call items`);
  check(calls[0] && calls[0].name === 'grep' && calls[0].arguments === grepArguments,
    `responses: grep ${calls[0] && calls[0].arguments}`);
  check(calls[0] && JSON.stringify(JSON.parse(calls[0].arguments)) === JSON.stringify(grepInput),
    'responses: grep arguments parse to its input');
  check(calls[1] && calls[1].name === 'ls' && calls[1].arguments === '{}', 'responses: the second call');
  check(deltas === grepArguments + '{}', `responses: deltas ${JSON.stringify(deltas)}`);
  check(response.usage.output_tokens === 12, `responses: output_tokens ${response.usage.output_tokens}`);
  return { items: response.output.length };
});

finish();
