// Drives a router with the official `openai` npm client and checks every chunk
// parses and usage is exact. Expects router_fake_server's script ("Hello",
// " world", EOS; 2 cached tokens) and its fake chat template.
//   node openai_client_check.mjs <port> <api-key>
// Needs `npm install openai` where node resolves modules from.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const [port, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 });
const expectUsage = (usage, prompt) => {
  assert.equal(usage.prompt_tokens, prompt);
  assert.equal(usage.completion_tokens, 3);
  assert.equal(usage.total_tokens, prompt + 3);
  assert.equal(usage.prompt_tokens_details.cached_tokens, 2);
};
const rendered = '<|user|>hi\n<|assistant|>';

let text = '', usage = null, chunks = 0, role = null;
const chat = await client.chat.completions.create({
  model: 'tiny', messages: [{ role: 'user', content: 'hi' }], stream: true,
  stream_options: { include_usage: true } });
for await (const chunk of chat) {
  chunks++;
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) usage = chunk.usage;
  const c = chunk.choices[0];
  if (c?.delta?.role) role = c.delta.role;
  if (c?.delta?.content) text += c.delta.content;
}
assert.equal(role, 'assistant');
assert.equal(text, 'Hello world');
expectUsage(usage, rendered.length);

text = ''; usage = null;
const completion = await client.completions.create({
  model: 'tiny', prompt: 'hi', stream: true, stream_options: { include_usage: true } });
for await (const chunk of completion) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices[0]) text += chunk.choices[0].text;
}
assert.equal(text, 'Hello world');
expectUsage(usage, 3);

const plain = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] });
assert.equal(plain.choices[0].message.content, 'Hello world');
expectUsage(plain.usage, rendered.length);

const models = await client.models.list();
assert.equal(models.data[0].id, 'tiny');

try {
  await client.completions.create({ model: 'tiny', prompt: '' });
  assert.fail('empty prompt accepted');
} catch (e) {
  assert.equal(e.status, 400);
  assert.equal(e.param, 'prompt');
}
try {
  await new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong-key', maxRetries: 0 })
      .completions.create({ model: 'tiny', prompt: 'hi' });
  assert.fail('wrong key accepted');
} catch (e) {
  assert.equal(e.status, 401);
}
console.log(`openai client check: OK (${chunks} chunks)`);
