// The official OpenAI JavaScript client against spillway-cli serve (test_openai_client.sh starts
// the server). Usage: node openai_client.mjs BASE_URL MODEL_ID GENERATED_TEXT
// GENERATED_TEXT: what `spillway-cli generate -p "Once upon a time" -n 24 --temp 0` adds to the
// prompt; the demo model has no chat template, so a chat reply continues the user's message and
// must be that text too.
import OpenAI from 'openai';
import { check, report } from './check.mjs';

const [, , baseURL, modelId, generated] = process.argv;
const client = new OpenAI({ baseURL, apiKey: 'not-needed-on-loopback', maxRetries: 0, timeout: 60000 });

const prompt = 'Once upon a time';
const messages = [{ role: 'user', content: prompt }];

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === modelId, 'models.list names the served model',
  JSON.stringify(models.data));

const chat = await client.chat.completions.create({ model: modelId, messages, max_tokens: 24, temperature: 0 });
const chatText = chat.choices[0].message.content;
check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant', 'a chat completion');
check(chatText === generated, 'its text is generate\'s', JSON.stringify({ chatText, generated }));
check(chat.usage.completion_tokens === 24 && chat.choices[0].finish_reason === 'length', 'usage and finish_reason',
  JSON.stringify(chat.usage));

const stream = await client.chat.completions.create({
  model: modelId, messages, max_tokens: 24, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let streamed = '';
let role = '';
let finish = null;
let usage = null;
const ids = new Set();
for await (const chunk of stream) {
  ids.add(chunk.id);
  if (chunk.usage) usage = chunk.usage;
  const choice = chunk.choices[0];
  if (!choice) continue;
  if (choice.delta.role) role = role || choice.delta.role;
  if (choice.delta.content) streamed += choice.delta.content;
  if (choice.finish_reason) finish = choice.finish_reason;
}
check(streamed === chatText, 'streamed chunks reassemble to the same text', JSON.stringify({ streamed, chatText }));
check(role === 'assistant' && finish === 'length' && ids.size === 1, 'the stream\'s role, finish_reason and one id');
check(usage && usage.completion_tokens === 24, 'the stream\'s usage chunk', JSON.stringify(usage));

const completion = await client.completions.create({ model: modelId, prompt, max_tokens: 24, temperature: 0 });
check(completion.choices[0].text === generated, 'a completion is generate\'s text',
  JSON.stringify(completion.choices[0].text));

const stop = generated.slice(Math.floor(generated.length / 2), Math.floor(generated.length / 2) + 3);
const stopped = await client.chat.completions.create({
  model: modelId, messages, max_tokens: 24, temperature: 0, stop: [stop],
});
check(stopped.choices[0].message.content === generated.slice(0, generated.indexOf(stop)) &&
  stopped.choices[0].finish_reason === 'stop', 'a stop sequence ends the text before it',
  JSON.stringify({ stop, got: stopped.choices[0].message.content }));

try {
  await client.chat.completions.create({ model: modelId, messages, temperature: 'hot' });
  check(false, 'a bad request is refused');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature' &&
    typeof e.message === 'string', 'a bad request is a 400 with OpenAI\'s error body', `${e}`);
}

report();
