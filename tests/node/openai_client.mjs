// The official OpenAI Node client streams a chat completion from our server,
// and its non-streamed answer and completions agree with the stream.
// Usage: node openai_client.mjs PROMPTCACHE_BINARY MODEL.gguf
import assert from 'node:assert/strict';
import path from 'node:path';
import { startServer, importOpenAI } from './serve.mjs';

const [bin, model] = process.argv.slice(2);
const OpenAI = await importOpenAI();
const { proc, port, exited } = await startServer(bin, model, ['--api-key', 'sk-test']);
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  const messages = [{ role: 'user', content: 'Tell me about a cat.' }];
  const stream = await client.chat.completions.create({
    model: 'stories', messages, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    chunks += 1;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (choice?.delta?.content) text += choice.delta.content;
    if (choice?.finish_reason) finish = choice.finish_reason;
  }
  assert.ok(chunks > 3, `expected several chunks, got ${chunks}`);
  assert.ok(text.length > 0, 'empty streamed text');
  assert.ok(finish === 'length' || finish === 'stop');
  assert.ok(usage && usage.prompt_tokens > 0 && usage.completion_tokens > 0, 'usage chunk missing');
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');

  const whole = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 24, temperature: 0 });
  assert.equal(whole.choices[0].message.content, text);
  assert.ok(whole.usage.prompt_tokens_details.cached_tokens > 0, 'the repeat should hit the cache');

  const comp = await client.completions.create({ model: 'stories', prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.ok(comp.choices[0].text.length > 0);
  const models = await client.models.list();
  assert.equal(models.data.length, 1);

  await assert.rejects(
    new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'wrong', maxRetries: 0 }).completions.create({ model: 'x', prompt: 'a' }),
    (e) => e.status === 401);
  await assert.rejects(client.completions.create({ model: 'x', prompt: 'a', max_tokens: -3 }), (e) => e.status === 400);

  // Structured output through the client's response_format: a reply that
  // stops is JSON with the schema's required keys and types.
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  let parsed = null;
  for (let seed = 0; seed < 8 && parsed === null; ++seed) {
    const r = await client.chat.completions.create({
      model: 'stories', messages, max_tokens: 200, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    });
    if (r.choices[0].finish_reason !== 'stop') continue;
    parsed = JSON.parse(r.choices[0].message.content);
  }
  assert.ok(parsed !== null, 'no constrained reply finished within 8 tries');
  assert.deepEqual(Object.keys(parsed).sort(), ['age', 'name']);
  assert.equal(typeof parsed.name, 'string');
  assert.ok(Number.isInteger(parsed.age) && parsed.age >= 0 && parsed.age <= 99);
  await assert.rejects(
    client.chat.completions.create({ model: 'x', messages, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { not: {} } } } }),
    (e) => e.status === 400 && /'not'/.test(e.message));
  console.log(`ok: streamed ${chunks} chunks, ${usage.completion_tokens} tokens: ${JSON.stringify(text)}`);
} finally {
  proc.kill('SIGTERM');
  assert.equal(await exited, 0, 'server did not exit cleanly on SIGTERM');
}

// Tools through the client, on a server with Qwen 2.5's template (Hermes
// <tool_call> tags): a forced call's arguments parse with the parameters'
// keys and types, and the streamed delta.tool_calls add up to it.
const template = path.join(path.dirname(model), '..', 'templates', 'Qwen-Qwen2.5-7B-Instruct.jinja');
const tooled = await startServer(bin, model, ['--chat-template-file', template]);
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${tooled.port}/v1`, apiKey: 'none', maxRetries: 0 });
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Weather in a city',
      parameters: {
        type: 'object', additionalProperties: false, required: ['city', 'days'],
        properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
      },
    },
  }];
  const body = {
    model: 'stories', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, max_tokens: 200,
  };
  let call = null;
  for (let seed = 0; seed < 8 && call === null; ++seed) {
    const r = await client.chat.completions.create({ ...body, seed });
    if (r.choices[0].finish_reason !== 'tool_calls') continue;
    call = r.choices[0].message.tool_calls[0];
    const stream = await client.chat.completions.create({ ...body, seed, stream: true });
    let name = '', args = '';
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        assert.equal(d.index, 0);
        if (d.function?.name) name += d.function.name;
        if (d.function?.arguments) args += d.function.arguments;
      }
    }
    assert.equal(name, call.function.name);
    assert.equal(args, call.function.arguments);
  }
  assert.ok(call !== null, 'no forced call finished within 8 tries');
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(args).sort(), ['city', 'days']);
  assert.ok(typeof args.city === 'string' && Number.isInteger(args.days) && args.days >= 1 && args.days <= 7);
  console.log(`ok: tool call ${call.function.name}(${call.function.arguments.replace(/\s+/g, ' ')})`);
} finally {
  tooled.proc.kill('SIGTERM');
  assert.equal(await tooled.exited, 0, 'the tools server did not exit cleanly on SIGTERM');
}
