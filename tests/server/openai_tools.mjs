// The official OpenAI JavaScript client against spillway-cli serve with a chat template that
// knows tools and thinking (Qwen3.5's own, --chat-template-file; test_openai_client.sh starts
// the server on the demo model): tool round trips whole and streamed, parallel and named calls,
// tool_choice "required", structured output validated by Ajv, reasoning_content apart from
// content, and the thinking switch. The demo model writes stories: what it writes here it writes
// because decoding is constrained.
// Usage: node openai_tools.mjs BASE_URL MODEL_ID
import OpenAI from 'openai';
import Ajv from 'ajv';
import { check, report } from './check.mjs';

const [, , baseURL, modelId] = process.argv;
const client = new OpenAI({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ strict: false });

const weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer' } },
  required: ['city', 'days'],
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a zone',
    parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 12 } }, required: ['zone'] } } },
];
const validWeather = ajv.compile(weather);
const noThinking = { chat_template_kwargs: { enable_thinking: false } };
const question = [{ role: 'user', content: 'What is the weather in Oslo?' }];

// 1. A call, whole: tool_choice required, one call.
const first = await client.chat.completions.create({
  model: modelId, messages: question, tools, tool_choice: 'required', parallel_tool_calls: false,
  max_tokens: 200, temperature: 1, seed: 11, ...noThinking,
});
const call = first.choices[0].message.tool_calls?.[0];
check(first.choices[0].finish_reason === 'tool_calls' && first.choices[0].message.tool_calls.length === 1,
  'tool_choice required gives one call and finish_reason tool_calls', JSON.stringify(first.choices[0]));
check(call && call.type === 'function' && typeof call.id === 'string' && call.id.length > 0, 'the call has an id and a type');
const args = call ? JSON.parse(call.function.arguments) : null;
check(call && (call.function.name !== 'get_weather' || validWeather(args)), 'its arguments validate against its parameters',
  call && call.function.arguments);

// 2. The same streamed: deltas with index, id, name and argument pieces reassemble to the same call.
const stream = await client.chat.completions.create({
  model: modelId, messages: question, tools, tool_choice: 'required', parallel_tool_calls: false,
  max_tokens: 200, temperature: 1, seed: 11, stream: true, ...noThinking,
});
const streamed = {};
let finish = null;
let content = '';
for await (const chunk of stream) {
  const choice = chunk.choices[0];
  if (!choice) continue;
  for (const d of choice.delta.tool_calls ?? []) {
    streamed[d.index] ??= { id: '', name: '', arguments: '' };
    if (d.id) streamed[d.index].id = d.id;
    if (d.function?.name) streamed[d.index].name += d.function.name;
    if (d.function?.arguments) streamed[d.index].arguments += d.function.arguments;
  }
  if (choice.delta.content) content += choice.delta.content;
  if (choice.finish_reason) finish = choice.finish_reason;
}
check(finish === 'tool_calls' && Object.keys(streamed).length === 1 && content === '', 'a streamed call ends with tool_calls');
check(call && streamed[0]?.name === call.function.name && streamed[0]?.arguments === call.function.arguments &&
  streamed[0]?.id.length > 0, 'the streamed pieces reassemble to the same call', JSON.stringify(streamed));

// 3. The tool's result goes back, and the model answers in text.
const answer = await client.chat.completions.create({
  model: modelId, tools, max_tokens: 24, temperature: 0, ...noThinking,
  messages: [...question, first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: '{"sky": "clear"}' }],
});
check(typeof answer.choices[0].message.content === 'string' && answer.choices[0].message.content.length > 0 &&
  !answer.choices[0].message.tool_calls, 'after the tool result the model answers', JSON.stringify(answer.choices[0]));

// 4. Parallel calls, and a function named in tool_choice.
const parallel = await client.chat.completions.create({
  model: modelId, messages: question, tools, tool_choice: 'required', max_tokens: 300, temperature: 1, seed: 5, ...noThinking,
});
const calls = parallel.choices[0].message.tool_calls ?? [];
check(calls.length >= 2 && new Set(calls.map((c) => c.id)).size === calls.length &&
  calls.every((c) => typeof JSON.parse(c.function.arguments) === 'object'), 'parallel calls, each its own id',
  JSON.stringify(calls));
const named = await client.chat.completions.create({
  model: modelId, messages: question, tools, tool_choice: { type: 'function', function: { name: 'get_time' } },
  parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 3, ...noThinking,
});
check(named.choices[0].message.tool_calls?.[0]?.function.name === 'get_time', 'a named function is the one called');

// 5. Structured output: a nested schema, 20 seeded samples at temperature 1, all valid.
const story = {
  type: 'object',
  properties: {
    title: { type: 'string', maxLength: 24 },
    mood: { enum: ['happy', 'sad', 'brave'] },
    people: { type: 'array', maxItems: 3, items: { type: 'object',
      properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } }, required: ['name', 'age'] } },
    ending: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 20 }] },
  },
  required: ['title', 'mood', 'people', 'ending'],
  additionalProperties: false,
};
const validStory = ajv.compile(story);
let valid = 0;
let firstInvalid = '';
for (let seed = 1; seed <= 20; seed++) {
  const r = await client.chat.completions.create({
    model: modelId, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 400, temperature: 1, seed,
    response_format: { type: 'json_schema', json_schema: { name: 'story', strict: true, schema: story } }, ...noThinking,
  });
  let ok = false;
  try {
    ok = validStory(JSON.parse(r.choices[0].message.content));
  } catch {
    ok = false;
  }
  if (ok) valid++;
  else if (!firstInvalid) firstInvalid = r.choices[0].message.content;
}
check(valid === 20, `response_format json_schema: ${valid} of 20 samples validate`, firstInvalid);
try {
  await client.chat.completions.create({
    model: modelId, messages: question, max_tokens: 8,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } },
  });
  check(false, 'a schema asking what is not supported is refused');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && /pattern/.test(e.message), 'a schema asking what is not supported is a 400 naming it',
    `${e}`);
}

// 6. Reasoning apart from the answer: Qwen3.5's template opens the thinking (a story model
// never closes it, so all of it is reasoning); with the switch off there is none.
const thinking = await client.chat.completions.create({
  model: modelId, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 24, temperature: 0, stream: true,
});
let reasoning = '';
let answerText = '';
for await (const chunk of thinking) {
  const d = chunk.choices[0]?.delta ?? {};
  if (d.reasoning_content) reasoning += d.reasoning_content;
  if (d.content) answerText += d.content;
}
check(reasoning.length > 0 && answerText === '', 'reasoning_content streams apart from content', JSON.stringify({ reasoning, answerText }));
const plain = await client.chat.completions.create({
  model: modelId, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 24, temperature: 0, ...noThinking,
});
check(plain.choices[0].message.content.length > 0 && !plain.choices[0].message.reasoning_content,
  'with enable_thinking false the reply is all answer', JSON.stringify(plain.choices[0].message));

report();
