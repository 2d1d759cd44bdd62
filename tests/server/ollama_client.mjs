// The official Ollama JavaScript client against spillway-cli serve (test_openai_client.sh starts
// it on the demo model with Qwen3.5's own chat template): the model listed, chat and generate
// streamed as NDJSON and whole, `format` with a schema (validated by Ajv), `tools` and a tool's
// result going back, `think` apart from the answer, show and version; with OTHER_ID (the server
// serves the app's library: serve --library), the library listed and that model loaded when a
// chat names it, and a name in neither refused.
// Usage: node ollama_client.mjs HOST MODEL_ID [OTHER_ID]
import { Ollama } from 'ollama';
import Ajv from 'ajv';
import { check, report } from './check.mjs';

const [, , host, modelId, otherId] = process.argv;
const ollama = new Ollama({ host });
const ajv = new Ajv({ strict: false });

const version = await ollama.version();
check(typeof version.version === 'string', 'version');
const tags = await ollama.list();
check(tags.models.some((m) => m.name === modelId && m.details.format === 'gguf'), '/api/tags lists the model',
  JSON.stringify(tags));
const show = await ollama.show({ model: modelId });
check(show.template.includes('<tool_call>') && show.capabilities.includes('tools') && show.capabilities.includes('thinking'),
  '/api/show gives the template and the capabilities', JSON.stringify(show.capabilities));
const ps = await ollama.ps();
check(ps.models.length === 1 && ps.models[0].name === modelId, '/api/ps names the loaded model');

const noThink = { think: false };
const user = [{ role: 'user', content: 'Once upon a time' }];

// Chat, whole and streamed: the same greedy text.
const whole = await ollama.chat({ model: modelId, messages: user, options: { temperature: 0, num_predict: 24 }, ...noThink });
check(whole.done && whole.done_reason === 'length' && whole.message.content.length > 0 && whole.eval_count === 24,
  'a chat, whole', JSON.stringify(whole));
let streamed = '';
let last = null;
for await (const part of await ollama.chat({ model: modelId, messages: user, stream: true,
  options: { temperature: 0, num_predict: 24 }, ...noThink })) {
  streamed += part.message.content;
  last = part;
}
check(streamed === whole.message.content && last.done, 'a streamed chat reassembles to the same text',
  JSON.stringify({ streamed, whole: whole.message.content }));

// format with a schema, streamed: the answer validates.
const schema = {
  type: 'object',
  properties: { hero: { type: 'string', maxLength: 16 }, friends: { type: 'array', maxItems: 3,
    items: { type: 'string', maxLength: 10 } }, happy: { type: 'boolean' } },
  required: ['hero', 'friends', 'happy'],
};
const valid = ajv.compile(schema);
let json = '';
for await (const part of await ollama.chat({ model: modelId, messages: user, stream: true, format: schema,
  options: { temperature: 1, seed: 4, num_predict: 300 }, ...noThink })) {
  json += part.message.content;
}
let parsed = null;
try {
  parsed = JSON.parse(json);
} catch {
  parsed = null;
}
check(parsed !== null && valid(parsed), 'format with a schema gives JSON that validates', json);
const object = await ollama.chat({ model: modelId, messages: user, format: 'json', options: { temperature: 1, seed: 2,
  num_predict: 300 }, ...noThink });
check(object.message.content.trim().startsWith('{'), 'format json gives an object', object.message.content);

// tools: offered, and a call with its result going back through the template.
const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
let toolText = '';
for await (const part of await ollama.chat({ model: modelId, messages: user, tools, stream: true,
  options: { temperature: 0, num_predict: 16 }, ...noThink })) {
  toolText += part.message.content;
  for (const c of part.message.tool_calls ?? []) toolText += JSON.stringify(c);
}
check(toolText.length > 0, 'a streamed chat with tools');
const round = await ollama.chat({
  model: modelId, tools, options: { temperature: 0, num_predict: 16 }, ...noThink,
  messages: [{ role: 'user', content: 'Weather in Oslo?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
    { role: 'tool', tool_name: 'get_weather', content: '{"sky": "clear"}' }],
});
check(round.done && round.message.content.length > 0, 'a tool result goes back and the model answers',
  JSON.stringify(round.message));

// think: Qwen3.5's template opens the thinking, and the story model never closes it.
let thinking = '';
let content = '';
for await (const part of await ollama.chat({ model: modelId, messages: user, stream: true, think: true,
  options: { temperature: 0, num_predict: 24 } })) {
  thinking += part.message.thinking ?? '';
  content += part.message.content;
}
check(thinking.length > 0 && content === '', 'think streams the reasoning apart', JSON.stringify({ thinking, content }));

// generate, through the template, whole and streamed.
const generated = await ollama.generate({ model: modelId, prompt: 'Once upon a time', options: { temperature: 0,
  num_predict: 24 }, ...noThink });
let pieces = '';
for await (const part of await ollama.generate({ model: modelId, prompt: 'Once upon a time', stream: true,
  options: { temperature: 0, num_predict: 24 }, ...noThink })) {
  pieces += part.response;
}
check(generated.response.length > 0 && pieces === generated.response && generated.done, 'generate, whole and streamed');
try {
  await ollama.chat({ model: modelId, messages: user, format: 'yaml' });
  check(false, 'a bad format is refused');
} catch (e) {
  check(/format/.test(e.message), 'a bad format is refused with a message naming it', `${e}`);
}

if (otherId) {
  const listed = (await ollama.list()).models.map((m) => m.name);
  check(listed.includes(modelId) && listed.includes(otherId), '/api/tags lists the library', JSON.stringify(listed));
  const other = await ollama.chat({ model: otherId, messages: user, options: { temperature: 0, num_predict: 8 }, ...noThink });
  const loaded = (await ollama.ps()).models.map((m) => m.name);
  check(other.model === otherId && other.done && other.eval_count === 8 && loaded.length === 1 && loaded[0] === otherId,
    'a chat naming another model of the library loads it (the one before unloaded)', JSON.stringify({ model: other.model, loaded }));
  try {
    await ollama.chat({ model: 'no-such-model', messages: user });
    check(false, 'a model in neither is refused');
  } catch (e) {
    check(/not found|neither/.test(e.message), 'a model neither loaded nor in the library is refused', `${e}`);
  }
}

report();
