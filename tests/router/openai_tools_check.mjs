// Tools through the official `openai` npm client (issue 26 item 5).
//   node openai_tools_check.mjs <port> <api-key> <mode>
// mode "hermes" / "llama3_json": tests/router/router_fake_server started with that
//   --tool-call-parser, whose fake engine answers a prompt containing "call a tool"
//   with a get_weather call for Paris in that format (after "Sure." for hermes). The
//   call must come out as tool_calls, whole and through chat.completions.stream()'s
//   accumulation, with finish_reason "tool_calls" and no call text in the content.
// mode "cluster": the real CPU cluster (random weights): tool_choice auto must give
//   either no tool_calls (finish_reason stop or length) or well-formed ones
//   (finish_reason tool_calls), streamed and not; a conversation with an assistant
//   tool call and a tool result is accepted; bad tools get a 400 naming the field.
// `openai` must resolve from this file's directory.
import OpenAI from 'openai';
import assert from 'node:assert/strict';

const [port, apiKey, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
const models = await client.models.list();
const model = models.data[0].id;
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
const ask = [{ role: 'user', content: 'Please call a tool: the weather in Paris?' }];

function checkCalls(name, message, finishReason) {
  const calls = message.tool_calls ?? [];
  for (const c of calls) {
    assert.equal(typeof c.id, 'string', `${name}: tool_call id`);
    assert.ok(c.id.length > 0, `${name}: tool_call id`);
    assert.equal(c.type, 'function', `${name}: tool_call type`);
    assert.equal(c.function.name, 'get_weather', `${name}: a tool that exists`);
    assert.equal(typeof c.function.arguments, 'string', `${name}: arguments are a JSON string`);
    JSON.parse(c.function.arguments);
  }
  if (calls.length > 0) {
    assert.equal(finishReason, 'tool_calls', `${name}: finish_reason with calls`);
  } else {
    assert.ok(['stop', 'length'].includes(finishReason), `${name}: finish_reason ${finishReason} without calls`);
    assert.equal(typeof message.content, 'string', `${name}: content without calls`);
  }
  return calls;
}

async function whole(request) {
  const r = await client.chat.completions.create(request);
  return { message: r.choices[0].message, finish: r.choices[0].finish_reason };
}

// The SDK's own accumulation of a stream (ChatCompletionStream).
async function streamed(request) {
  const stream = client.chat.completions.stream(request);
  let leaked = '';
  stream.on('content', (delta) => { leaked += delta; });
  const done = await stream.finalChatCompletion();
  return { message: done.choices[0].message, finish: done.choices[0].finish_reason, content: leaked };
}

if (mode === 'cluster') {
  for (const seed of [1, 2, 3]) {
    const request = { model, messages: ask, tools, max_tokens: 24, temperature: 1, seed };
    const w = await whole(request);
    checkCalls(`whole seed ${seed}`, w.message, w.finish);
    const s = await streamed(request);
    checkCalls(`streamed seed ${seed}`, s.message, s.finish);
    assert.equal(s.message.content ?? '', w.message.content ?? '', `seed ${seed}: same content streamed and not`);
  }
  const history = [...ask,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
      function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }];
  const h = await whole({ model, messages: history, tools, tool_choice: 'none', max_tokens: 4 });
  assert.equal(h.message.tool_calls ?? undefined, undefined, 'tool_choice none: no calls');
  for (const [bad, param] of [
    [{ tools: 'not-a-list' }, 'tools'],
    [{ tools: [{ type: 'function', function: { parameters: { type: 'object' } } }] }, 'tools[0].function.name'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name'],
  ]) {
    try {
      await client.chat.completions.create({ model, messages: ask, max_tokens: 2, ...bad });
      assert.fail(`accepted ${JSON.stringify(bad)}`);
    } catch (e) {
      assert.ok(e instanceof OpenAI.BadRequestError, `${param}: ${e}`);
      assert.equal(e.param, param);
    }
  }
} else {
  const request = { model, messages: ask, tools };
  const w = await whole(request);
  const calls = checkCalls('whole', w.message, w.finish);
  assert.equal(calls.length, 1, 'whole: one call');
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { city: 'Paris' });
  assert.equal(w.message.content, mode === 'hermes' ? 'Sure.' : null, 'whole: content outside the call');
  const s = await streamed({ ...request, stream_options: { include_usage: true } });
  const streamedCalls = checkCalls('streamed', s.message, s.finish);
  assert.equal(streamedCalls.length, 1, 'streamed: one call');
  assert.equal(streamedCalls[0].function.arguments, calls[0].function.arguments, 'streamed = whole arguments');
  assert.equal(s.content, mode === 'hermes' ? 'Sure.' : '', 'streamed: only the content, no call text');
}
console.log(`openai tools check (${mode}): OK`);
