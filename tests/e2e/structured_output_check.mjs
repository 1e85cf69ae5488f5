// Drives the real cluster with the official `openai` npm client for structured output and
// echo (issue 26 items 2 and 4):
//   node structured_output_check.mjs <port> <api-key> <ajv dir> <cases.json>
// cases.json: { "model": "tiny",
//   "schemas": [ { "name", "api": "chat" | "completion", "stream": bool, "request": {...create() body...},
//                  "schema": {...} | null (json_object: any object) } ],
//   "tools": [ { "name", "request": {...chat.completions.create() body with tools...},
//                "parameters": { "<tool name>": {...its parameters schema...} } } ],
//   "echo": [ { "name", "request": {...completions.create() body...}, "expect": {
//                 "text", "completion_tokens", "tokens": [bytes...] per token,
//                 "token_logprobs": [null | number], "top": [null | [{ "bytes", "logprob" }]] } } ] }
//   "extensions": true (optional): priority and include_timing through the client: usage.timing
//     with every stage and a server-timing header; a priority of the wrong type is a BadRequestError.
// Every structured completion that ends with finish_reason "stop" must parse and validate
// against its schema with ajv (independent of our grammar); the script prints a JSON summary
// { stopped, length, failures: [...] } on its last line. Echo cases must equal the reference
// engine's prompt logprobs within 1e-4. `openai` resolves from this file's directory.
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const [port, apiKey, ajvDir, casesPath] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const Ajv2020 = require(path.join(ajvDir, 'dist', '2020')).default;
const ajv = new Ajv2020({ strict: false, allErrors: true });
const cases = JSON.parse(readFileSync(casesPath, 'utf8'));
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 });
const failures = [];
let stopped = 0, length = 0;

async function complete(c) {
  const body = { model: cases.model, ...c.request };
  const endpoint = c.api === 'chat' ? client.chat.completions : client.completions;
  if (!c.stream) {
    const r = await endpoint.create(body);
    const choice = r.choices[0];
    return { text: c.api === 'chat' ? choice.message.content : choice.text, finish: choice.finish_reason };
  }
  let text = '', finish = null;
  for await (const chunk of await endpoint.create({ ...body, stream: true })) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    text += (c.api === 'chat' ? choice.delta?.content : choice.text) ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { text, finish };
}

// tool_choice required / named: the calls must name a tool and their arguments validate
// against its parameters schema.
async function checkTools(c) {
  const r = await client.chat.completions.create({ model: cases.model, ...c.request });
  const choice = r.choices[0];
  if (choice.finish_reason === 'length') {
    length++;
    return;
  }
  stopped++;
  const calls = choice.message.tool_calls ?? [];
  if (calls.length === 0) return failures.push(`${c.name}: no tool_calls (${choice.finish_reason}): ${choice.message.content}`);
  for (const call of calls) {
    const schema = c.parameters[call.function.name];
    if (!schema) {
      failures.push(`${c.name}: unknown tool ${call.function.name}`);
      continue;
    }
    let args;
    try {
      args = JSON.parse(call.function.arguments);
    } catch (e) {
      failures.push(`${c.name}: arguments not JSON: ${call.function.arguments}`);
      continue;
    }
    const validate = ajv.compile(schema);
    if (!validate(args)) failures.push(`${c.name}: ${ajv.errorsText(validate.errors)}: ${call.function.arguments}`);
  }
}

async function checkSchema(c) {
  const { text, finish } = await complete(c);
  if (finish !== 'stop') {
    if (finish !== 'length') failures.push(`${c.name}: finish_reason ${finish}`);
    length++;
    return;
  }
  stopped++;
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    failures.push(`${c.name}: not JSON (${e.message}): ${text}`);
    return;
  }
  if (c.schema === null) {
    if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) failures.push(`${c.name}: not an object: ${text}`);
    return;
  }
  const validate = ajv.compile(c.schema);
  if (!validate(doc)) failures.push(`${c.name}: ${ajv.errorsText(validate.errors)}: ${text}`);
}

const near = (a, b) => Math.abs(a - Math.max(b, -9999)) <= 1e-4;

async function checkEcho(c) {
  const r = await client.completions.create({ model: cases.model, ...c.request });
  const choice = r.choices[0], e = c.expect;
  const fail = (what) => failures.push(`${c.name}: ${what}`);
  if (choice.text !== e.text) fail(`text ${JSON.stringify(choice.text)} != ${JSON.stringify(e.text)}`);
  if (r.usage.completion_tokens !== e.completion_tokens) fail(`completion_tokens ${r.usage.completion_tokens}`);
  const lp = choice.logprobs;
  if (!lp || lp.token_logprobs.length !== e.token_logprobs.length) {
    return fail(`${lp ? lp.token_logprobs.length : 'no'} logprob entries, want ${e.token_logprobs.length}`);
  }
  for (let i = 0; i < e.token_logprobs.length; i++) {
    const want = e.token_logprobs[i], got = lp.token_logprobs[i];
    if (want === null ? got !== null : !(typeof got === 'number' && near(got, want))) {
      fail(`token ${i}: logprob ${got}, want ${want}`);
    }
    if (e.top[i] === null) {
      if (lp.top_logprobs[i] !== null) fail(`token ${i}: top_logprobs not null`);
      continue;
    }
    // The legacy shape keys entries by token text; compare the values of the texts both have.
    for (const t of e.top[i]) {
      const key = Buffer.from(t.bytes).toString('utf8');
      if (key.includes('\ufffd')) continue;  // a piece of a character: its text is lossy
      const got = lp.top_logprobs[i][key];
      if (typeof got !== 'number' || !near(got, t.logprob)) fail(`token ${i}: top ${JSON.stringify(key)} ${got}, want ${t.logprob}`);
    }
  }
  if (lp.tokens.length !== e.tokens.length) fail(`${lp.tokens.length} tokens, want ${e.tokens.length}`);
}

// The router's extensions, passed through the client as extra body fields.
async function checkExtensions() {
  const fail = (what) => failures.push(`extensions: ${what}`);
  const body = { model: cases.model, messages: [{ role: 'user', content: 'Time me.' }], max_tokens: 8,
                 priority: 5, include_timing: true };
  const { data, response } = await client.chat.completions.create(body).withResponse();
  const timing = data.usage?.timing;
  for (const stage of ['router_queue', 'decode_queue', 'prefill_queue', 'prefill', 'kv_transfer', 'kv_wait',
                       'first_token', 'total']) {
    if (typeof timing?.[stage] !== 'number' || timing[stage] < 0) fail(`usage.timing.${stage} is ${timing?.[stage]}`);
  }
  const header = response.headers.get('server-timing') ?? '';
  if (!/prefill;dur=[0-9.]+/.test(header) || !/kv-transfer;dur=/.test(header)) fail(`server-timing: ${header}`);
  try {
    await client.chat.completions.create({ ...body, priority: 'high' });
    fail('priority "high" was accepted');
  } catch (e) {
    if (!(e instanceof OpenAI.BadRequestError) || e.param !== 'priority') fail(`priority "high": ${e}`);
  }
}

try {
  if (cases.extensions) await checkExtensions();
  await Promise.all([...cases.schemas.map(checkSchema), ...(cases.tools ?? []).map(checkTools)]);
  for (const c of cases.echo) await checkEcho(c);
} catch (e) {
  failures.push(`client error: ${e.message}`);
}
console.log(JSON.stringify({ stopped, length, failures }));
