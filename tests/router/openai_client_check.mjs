// Drives a router with the official `openai` npm client: every streamed chunk
// must parse through the client and carry the right object type, id and model;
// the text, finish_reason and usage (prompt, completion, total, cached tokens)
// must equal the expectations exactly.
//   node openai_client_check.mjs <port> <api-key> [expect.json]
// expect.json (written by tests/e2e/openai_client_e2e_test.cc for the real cluster):
//   { "model": "tiny",
//     "cases": [ { "name": "...", "api": "chat" | "completion", "request": {...create() body...},
//                  "expect": { "text", "prompt_tokens", "completion_tokens", "cached_tokens",
//                              "finish_reason",
//                              "logprobs": [ { "bytes", "logprob", "top": [ { "bytes", "logprob" } ] } ]
//                                (optional: each output token's, within 1e-4) },
//                  "same_text_as": "<name of an earlier case>" (optional) } ],
//     "check_errors": true,    // empty prompt -> 400 param "prompt", wrong key -> 401, a tool without a
//                              // name -> 400 BadRequestError naming it, models.retrieve, unknown fields listed
//                              // in the x-tandem-ignored-fields header
//     "tokenize": { "prompt", "tokens", "plain_tokens", "messages", "chat_count",
//                   "usage_of": "<case whose usage.prompt_tokens must equal the count>",
//                   "chat_usage_of": "<the same for the chat count>",
//                   "reference": { "node_modules", "tokenizer_dir" } (optional: @huggingface/tokenizers) } }
// Without expect.json the expectations of tests/router/router_fake_server are used
// (script "Hello", " world", EOS; 2 cached tokens; its fake chat template).
// `openai` must resolve from this file's directory (the e2e test copies it next
// to a node_modules link).
import OpenAI from 'openai';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const [port, apiKey, expectPath] = process.argv.slice(2);

function fakeServerExpectations() {
  const rendered = '<|user|>hi\n<|assistant|>';  // the fake chat template, one token per byte
  const expect = (prompt) => ({ text: 'Hello world', prompt_tokens: prompt, completion_tokens: 3,
                                cached_tokens: 2, finish_reason: 'stop' });
  const chat = { model: 'tiny', messages: [{ role: 'user', content: 'hi' }] };
  return {
    model: 'tiny',
    check_errors: true,
    cases: [
      { name: 'chat streamed', api: 'chat', expect: expect(rendered.length),
        request: { ...chat, stream: true, stream_options: { include_usage: true } } },
      { name: 'completion streamed', api: 'completion', expect: expect(3),
        request: { model: 'tiny', prompt: 'hi', stream: true, stream_options: { include_usage: true } } },
      { name: 'chat plain', api: 'chat', expect: expect(rendered.length), request: chat,
        same_text_as: 'chat streamed' },
      // The fake engine skips EOS until min_tokens tokens are out, as the engine masks it.
      { name: 'completion min_tokens', api: 'completion',
        request: { model: 'tiny', prompt: 'hi', min_tokens: 5, max_tokens: 8 },
        expect: { ...expect(3), text: 'Hello worldHello worldHello world', completion_tokens: 7 } },
      { name: 'completion include_stop_str_in_output', api: 'completion',
        request: { model: 'tiny', prompt: 'hi', stop: ['world'], include_stop_str_in_output: true, stream: true,
                   stream_options: { include_usage: true } },
        expect: { ...expect(3), text: 'Hello world', completion_tokens: 2 } },
    ],
    tokenize: { prompt: 'hi', tokens: [257, 104, 105], plain_tokens: [104, 105],
                messages: chat.messages, chat_count: rendered.length,
                usage_of: 'completion streamed', chat_usage_of: 'chat streamed' },
  };
}

// The logprobs a response carried, in one shape for both APIs: [{token, bytes?, logprob, top: [{token, logprob}]}].
function chatLogprobs(logprobs) {
  return (logprobs?.content ?? []).map((e) => ({
    token: e.token, bytes: e.bytes, logprob: e.logprob,
    top: e.top_logprobs.map((t) => ({ token: t.token, bytes: t.bytes, logprob: t.logprob })) }));
}
function completionLogprobs(logprobs) {
  if (!logprobs) return [];
  return logprobs.tokens.map((token, i) => ({
    token, logprob: logprobs.token_logprobs[i], offset: logprobs.text_offset[i],
    top: Object.entries(logprobs.top_logprobs[i]).map(([t, lp]) => ({ token: t, logprob: lp })) }));
}

const text = (bytes) => Buffer.from(bytes).toString('utf8');

function checkLogprobs(name, isChat, got, want) {
  assert.equal(got.length, want.length, `${name}: one logprobs entry per output token`);
  const near = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4, `${name}: ${what}: ${a} vs reference ${b}`);
  let offset = 0;
  for (let i = 0; i < want.length; ++i) {
    const g = got[i], w = want[i];
    assert.equal(g.token, text(w.bytes), `${name}: token ${i}`);
    near(g.logprob, w.logprob, `logprob of token ${i}`);
    if (isChat) {
      assert.deepEqual(g.bytes, w.bytes, `${name}: bytes of token ${i}`);
      assert.equal(g.top.length, w.top.length, `${name}: top_logprobs of token ${i}`);
      w.top.forEach((t, j) => {
        assert.deepEqual(g.top[j].bytes, t.bytes, `${name}: top ${j} of token ${i}`);
        near(g.top[j].logprob, t.logprob, `top ${j} of token ${i}`);
      });
    } else {
      // A dict of token text -> logprob: the top entries and the sampled token.
      for (const t of [...w.top, w]) {
        const entry = g.top.find((e) => e.token === text(t.bytes));
        assert.ok(entry, `${name}: ${JSON.stringify(text(t.bytes))} missing from top_logprobs of token ${i}`);
        if (w.top.filter((u) => text(u.bytes) === text(t.bytes)).length <= 1) {
          near(entry.logprob, t.logprob, `top_logprobs[${JSON.stringify(text(t.bytes))}] of token ${i}`);
        }
      }
      assert.equal(g.offset, offset, `${name}: text_offset of token ${i}`);
      offset += [...text(w.bytes)].length;
    }
  }
}

const spec = expectPath ? JSON.parse(readFileSync(expectPath, 'utf8')) : fakeServerExpectations();
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });

function checkUsage(name, usage, e) {
  assert.ok(usage, `${name}: no usage`);
  assert.equal(usage.prompt_tokens, e.prompt_tokens, `${name}: usage.prompt_tokens`);
  assert.equal(usage.completion_tokens, e.completion_tokens, `${name}: usage.completion_tokens`);
  assert.equal(usage.total_tokens, e.prompt_tokens + e.completion_tokens, `${name}: usage.total_tokens`);
  assert.equal(usage.prompt_tokens_details?.cached_tokens, e.cached_tokens,
               `${name}: usage.prompt_tokens_details.cached_tokens`);
}

// A streamed call: every chunk is parsed by the client; returns {text, usage, finish_reason, chunks}.
async function runStreamed(c) {
  const isChat = c.api === 'chat';
  const stream = isChat ? await client.chat.completions.create(c.request)
                        : await client.completions.create(c.request);
  const out = { text: '', usage: null, finish_reason: null, chunks: 0, logprobs: [] };
  let id = null, role = null, finishes = 0, usageChunks = 0;
  for await (const chunk of stream) {
    out.chunks++;
    assert.equal(chunk.object, isChat ? 'chat.completion.chunk' : 'text_completion', `${c.name}: chunk.object`);
    id ??= chunk.id;
    assert.ok(typeof chunk.id === 'string' && chunk.id.length > 0, `${c.name}: chunk.id`);
    assert.equal(chunk.id, id, `${c.name}: one id for every chunk`);
    assert.equal(chunk.model, spec.model, `${c.name}: chunk.model`);
    assert.ok(Number.isInteger(chunk.created), `${c.name}: chunk.created`);
    assert.equal(usageChunks, 0, `${c.name}: nothing may follow the usage chunk`);
    if (chunk.usage) {
      usageChunks++;
      out.usage = chunk.usage;
      assert.deepEqual(chunk.choices, [], `${c.name}: the usage chunk has no choices`);
      continue;
    }
    assert.equal(chunk.choices.length, 1, `${c.name}: one choice per chunk`);
    const choice = chunk.choices[0];
    assert.equal(choice.index, 0, `${c.name}: choice.index`);
    assert.equal(finishes, 0, `${c.name}: no choice chunk after finish_reason`);
    out.logprobs.push(...(isChat ? chatLogprobs(choice.logprobs) : completionLogprobs(choice.logprobs)));
    if (isChat) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) {
        assert.equal(role, 'assistant', `${c.name}: role before content`);
        out.text += choice.delta.content;
      }
    } else {
      out.text += choice.text;
    }
    if (choice.finish_reason) {
      finishes++;
      out.finish_reason = choice.finish_reason;
    }
  }
  assert.equal(finishes, 1, `${c.name}: exactly one finish_reason`);
  if (c.request.stream_options?.include_usage) assert.equal(usageChunks, 1, `${c.name}: one usage chunk`);
  return out;
}

async function runPlain(c) {
  const isChat = c.api === 'chat';
  const r = isChat ? await client.chat.completions.create(c.request) : await client.completions.create(c.request);
  assert.equal(r.object, isChat ? 'chat.completion' : 'text_completion', `${c.name}: object`);
  assert.equal(r.model, spec.model, `${c.name}: model`);
  assert.equal(r.choices.length, 1, `${c.name}: one choice`);
  const choice = r.choices[0];
  if (isChat) assert.equal(choice.message.role, 'assistant', `${c.name}: message.role`);
  return { text: isChat ? choice.message.content : choice.text, usage: r.usage,
           finish_reason: choice.finish_reason, chunks: 0,
           logprobs: isChat ? chatLogprobs(choice.logprobs) : completionLogprobs(choice.logprobs) };
}

const texts = new Map();
const usages = new Map();
let chunks = 0;
for (const c of spec.cases) {
  const out = c.request.stream ? await runStreamed(c) : await runPlain(c);
  chunks += out.chunks;
  assert.equal(out.text, c.expect.text, `${c.name}: text`);
  assert.equal(out.finish_reason, c.expect.finish_reason, `${c.name}: finish_reason`);
  if (!c.request.stream || c.request.stream_options?.include_usage) checkUsage(c.name, out.usage, c.expect);
  if (c.expect.logprobs) checkLogprobs(c.name, c.api === 'chat', out.logprobs, c.expect.logprobs);
  if (c.same_text_as) {
    assert.ok(texts.has(c.same_text_as), `${c.name}: no earlier case ${c.same_text_as}`);
    assert.equal(out.text, texts.get(c.same_text_as), `${c.name}: text differs from ${c.same_text_as}`);
  }
  texts.set(c.name, out.text);
  usages.set(c.name, out.usage);
  console.log(`${c.name}: OK (${out.chunks} chunks, ${out.usage?.prompt_tokens} + ` +
              `${out.usage?.completion_tokens} tokens, ${out.usage?.prompt_tokens_details?.cached_tokens} cached)`);
}

const models = await client.models.list();
assert.equal(models.data[0].id, spec.model);
const model = await client.models.retrieve(spec.model);
assert.equal(model.id, spec.model);
assert.equal(model.object, 'model');
assert.deepEqual(model, models.data[0], 'models.retrieve = the list entry');

if (spec.check_errors) {
  try {
    await client.completions.create({ model: spec.model, prompt: '' });
    assert.fail('empty prompt accepted');
  } catch (e) {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'prompt');
  }
  try {
    await new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong-key', maxRetries: 0 })
        .completions.create({ model: spec.model, prompt: 'hi' });
    assert.fail('wrong key accepted');
  } catch (e) {
    assert.equal(e.status, 401);
  }
}
if (spec.check_errors) {
  try {
    await client.models.retrieve('no-such-model');
    assert.fail('an unknown model was found');
  } catch (e) {
    assert.ok(e instanceof OpenAI.NotFoundError, `models.retrieve: ${e}`);
    assert.equal(e.status, 404);
  }
  // A bad tool definition is refused with the field named (openai_tools_check.mjs does the rest).
  try {
    await client.chat.completions.create({
      model: spec.model, messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { parameters: { type: 'object' } } }],
    });
    assert.fail('a tool without a name accepted');
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, `tools: ${e}`);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'tools[0].function.name');
  }
  // A field it does not know is ignored, as vLLM does, and named in a header.
  const { response } = await client.completions
      .create({ model: spec.model, prompt: 'hi', max_tokens: 2, frobnicate: 1 }).withResponse();
  assert.equal(response.headers.get('x-tandem-ignored-fields'), 'frobnicate');
}

// vLLM's /tokenize and /detokenize (outside /v1, same key), with plain fetch: the SDK has no method for them.
async function postRoot(route, body) {
  const r = await fetch(`http://127.0.0.1:${port}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body) });
  const json = await r.json();
  assert.equal(r.status, 200, `${route}: ${JSON.stringify(json)}`);
  return json;
}

if (spec.tokenize) {
  const t = spec.tokenize;
  const tok = await postRoot('/tokenize', { model: spec.model, prompt: t.prompt });
  assert.deepEqual(tok.tokens, t.tokens, '/tokenize tokens');
  assert.equal(tok.count, t.tokens.length, '/tokenize count');
  assert.ok(Number.isInteger(tok.max_model_len) && tok.max_model_len > 0, '/tokenize max_model_len');
  assert.equal(tok.count, usages.get(t.usage_of)?.prompt_tokens, `/tokenize count = ${t.usage_of} prompt_tokens`);
  const plain = await postRoot('/tokenize', { prompt: t.prompt, add_special_tokens: false });
  assert.deepEqual(plain.tokens, t.plain_tokens, '/tokenize add_special_tokens false');
  const back = await postRoot('/detokenize', { model: spec.model, tokens: plain.tokens });
  assert.equal(back.prompt, t.prompt, 'detokenize(tokenize(x)) = x');
  const chatTok = await postRoot('/tokenize', { model: spec.model, messages: t.messages });
  assert.equal(chatTok.count, t.chat_count, '/tokenize messages count');
  assert.equal(chatTok.count, usages.get(t.chat_usage_of)?.prompt_tokens,
               `/tokenize messages count = ${t.chat_usage_of} prompt_tokens`);
  if (t.reference) {  // an independent implementation of the same tokenizer.json
    const require = createRequire(path.join(t.reference.node_modules, 'noop.js'));
    const { Tokenizer } = require('@huggingface/tokenizers');
    const read = (f) => JSON.parse(readFileSync(path.join(t.reference.tokenizer_dir, f), 'utf8'));
    const ref = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
    assert.deepEqual(tok.tokens, ref.encode(t.prompt, { add_special_tokens: true }).ids, 'reference tokenizer');
    assert.deepEqual(plain.tokens, ref.encode(t.prompt, { add_special_tokens: false }).ids, 'reference (plain)');
    console.log('tokenize: the reference tokenizer agrees');
  }
  console.log(`tokenize: OK (${tok.count} + ${chatTok.count} tokens)`);
}
console.log(`openai client check: OK (${spec.cases.length} cases, ${chunks} chunks)`);
