// Structured output (issue 16) through the official OpenAI SDK against a real `tandem-infer serve`:
// response_format json_object and json_schema are decoded under a grammar, so even the tiny
// random-weight model (cpu backend, the Qwen3 tokenizer fitted to it: serve_fixture.mjs) answers
// with JSON that parses and validates against the schema (checked by Ajv, a JSON Schema
// validator independent of ours), greedy, sampled and streamed, also when max_tokens leaves little
// room; schemas that cannot be enforced are refused naming the field and the keyword.
// Env: TANDEM_INFER_BIN (the binary, set by CTest), TANDEM_TESTDATA (reference data).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { startTinyServer, stopTinyServer } from './serve_fixture.mjs';

const API_KEY = 'sdk-structured-key-0123456789';
const MODEL = 'tiny-json';

let tiny;

before(async () => {
  tiny = await startTinyServer(MODEL, { apiKey: API_KEY });
});

after(() => stopTinyServer(tiny));

const client = () => tiny.client;
const ajv = new Ajv({ strict: false });

const SCHEMAS = {
  weather: {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 20 },
      temperature: { type: 'number' },
      unit: { enum: ['celsius', 'fahrenheit'] },
      raining: { type: 'boolean' },
    },
    required: ['city', 'temperature', 'unit', 'raining'],
    additionalProperties: false,
  },
  orders: {
    type: 'object',
    properties: {
      orders: {
        type: 'array',
        minItems: 1,
        maxItems: 3,
        items: {
          type: 'object',
          properties: {
            id: { type: 'integer' },
            sku: { type: 'string', minLength: 2, maxLength: 8 },
            note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
          },
          required: ['id', 'sku'],
          additionalProperties: false,
        },
      },
    },
    required: ['orders'],
    additionalProperties: false,
  },
  tree: {
    $defs: {
      node: {
        type: 'object',
        properties: {
          name: { type: 'string', maxLength: 6 },
          children: { type: 'array', maxItems: 2, items: { $ref: '#/$defs/node' } },
        },
        required: ['name', 'children'],
        additionalProperties: false,
      },
    },
    $ref: '#/$defs/node',
  },
};

const messages = [{ role: 'user', content: 'Answer in JSON.' }];

function jsonSchemaFormat(name) {
  return { type: 'json_schema', json_schema: { name, schema: SCHEMAS[name], strict: true } };
}

function checkValid(name, text) {
  let value;
  assert.doesNotThrow(() => { value = JSON.parse(text); }, `not JSON: ${text}`);
  const validate = ajv.compile(SCHEMAS[name]);
  assert.ok(validate(value), `${name}: ${text}\n${JSON.stringify(validate.errors)}`);
  return value;
}

test('json_schema: every answer parses and validates, greedy and sampled', async () => {
  for (const name of Object.keys(SCHEMAS)) {
    for (const sampling of [{ temperature: 0 }, { temperature: 1, seed: 7 }, { temperature: 1.3, top_p: 0.9, seed: 11 }]) {
      const res = await client().chat.completions.create({
        model: MODEL, messages, max_tokens: 200, response_format: jsonSchemaFormat(name), ...sampling,
      });
      const choice = res.choices[0];
      console.log(`${name} ${JSON.stringify(sampling)}: ${choice.message.content}`);
      checkValid(name, choice.message.content);
      assert.equal(choice.finish_reason, 'stop');
    }
  }
});

test('json_object: any JSON object, also when max_tokens is small', async () => {
  for (const max_tokens of [12, 40, 300]) {
    const res = await client().chat.completions.create({
      model: MODEL, messages, max_tokens, temperature: 0.8, seed: max_tokens, response_format: { type: 'json_object' },
    });
    const text = res.choices[0].message.content;
    console.log(`json_object max_tokens ${max_tokens}: ${text}`);
    const value = JSON.parse(text);
    assert.equal(typeof value, 'object');
    assert.ok(value !== null && !Array.isArray(value), text);
    assert.ok(res.usage.completion_tokens <= max_tokens);
  }
});

test('the same model without response_format does not write JSON', async () => {
  const res = await client().chat.completions.create({ model: MODEL, messages, max_tokens: 30, temperature: 0 });
  assert.throws(() => JSON.parse(res.choices[0].message.content));
});

test('streamed structured output concatenates to valid JSON', async () => {
  const stream = await client().chat.completions.create({
    model: MODEL, messages, max_tokens: 200, temperature: 1, seed: 3, stream: true,
    response_format: jsonSchemaFormat('orders'),
  });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices.length === 0) continue;
    text += chunk.choices[0].delta?.content ?? '';
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  checkValid('orders', text);
  assert.equal(finish, 'stop');
});

test('schemas that cannot be enforced are refused naming the field and the keyword', async () => {
  const bad = [
    [{ type: 'object', properties: { day: { type: 'string', format: 'date' } } }, '/properties/day', 'format'],
    [{ type: 'string', pattern: '^[a-z]+$' }, '/', 'pattern'],
    [{ type: 'array', items: { type: 'integer' }, uniqueItems: true }, '/', 'uniqueItems'],
    [{ $ref: '#/$defs/missing' }, '/$ref', 'does not resolve'],
  ];
  for (const [schema, where, what] of bad) {
    await assert.rejects(
      client().chat.completions.create({
        model: MODEL, messages, max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'bad', schema } },
      }),
      (err) => err instanceof OpenAI.BadRequestError && err.param === 'response_format.json_schema.schema' &&
        err.message.includes(where) && err.message.includes(what),
      `expected a 400 naming ${where} ${what}`);
  }
  await assert.rejects(
    client().chat.completions.create({ model: MODEL, messages, max_tokens: 8, response_format: { type: 'xml' } }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'response_format.type');
});
