// A third-party A2A client (@a2a-js/sdk) holding a conversation with
// superstep's A2A server: two messages in one context, the second of which
// must see the first.
//
//   node threads.mjs BASE_URL
//
// BASE_URL serves the test graph "memo" at BASE_URL/a2a/memo (see
// pkg/a2a/threads_test.go). The script prints one JSON object with what it
// saw at each step; the Go test (js_test.go) checks it. It never throws:
// a failing step records its error and the others still run.
import { randomUUID } from 'node:crypto';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Message, TaskState } from '@a2a-js/sdk';

const base = process.argv[2];
if (!base) {
  console.error('usage: node threads.mjs BASE_URL');
  process.exit(2);
}

const stateName = (s) => (typeof s === 'number' ? TaskState[s] : String(s));

const message = (text, extra = {}) =>
  Message.fromJSON({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

const textOf = (m) =>
  (m?.parts ?? [])
    .filter((p) => p?.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');

const roleOf = (m) => (String(m?.role).includes('USER') || m?.role === 1 ? 'user' : 'agent');

// lastReply is the text of the last message in the state artifact's
// messages channel.
const lastReply = (task) => {
  for (const a of task?.artifacts ?? []) {
    for (const p of a.parts ?? []) {
      if (p?.content?.$case === 'data') {
        const msgs = p.content.value?.messages ?? [];
        const last = msgs[msgs.length - 1];
        return (last?.content ?? []).map((b) => b.text ?? '').join('');
      }
    }
  }
  return null;
};

const summary = (task) => ({
  id: task.id,
  contextId: task.contextId,
  state: stateName(task.status?.state),
  reply: lastReply(task),
  history: (task.history ?? []).map((m) => `${roleOf(m)}: ${textOf(m)}`),
});

const errorOf = (err) => ({ error: err?.constructor?.name ?? 'Error', code: err?.code ?? null, message: String(err?.message ?? err) });

const out = { steps: {} };

async function step(name, fn) {
  try {
    out.steps[name] = await fn();
  } catch (err) {
    out.steps[name] = errorOf(err);
  }
}

const client = await new ClientFactory().createFromUrl(`${base}/a2a/memo/.well-known/agent-card.json`, '');

// Turn one: no contextId; the server names the conversation.
let first;
await step('first', async () => {
  first = await client.sendMessage({ message: message('my name is Ana') });
  return summary(first);
});

// Turn two: the same contextId, no taskId.
let second;
await step('second', async () => {
  second = await client.sendMessage({ message: message('what is my name?', { contextId: first.contextId }) });
  return summary(second);
});

// The second task read again, its history bounded.
await step('get', async () => summary(await client.getTask({ id: second.id, historyLength: 2 })));

// A message while the context's task is still working: refused (the
// server's strategy is reject), and the working task goes on.
await step('busy', async () => {
  const slow = await client.sendMessage({ message: message('slow', { contextId: first.contextId }), configuration: { returnImmediately: true } });
  let refused;
  try {
    const t = await client.sendMessage({ message: message('hello?', { contextId: first.contextId }) });
    refused = { accepted: summary(t) };
  } catch (err) {
    refused = errorOf(err);
  }
  const canceled = await client.cancelTask({ id: slow.id });
  return { slow: slow.id, refused, canceled: stateName(canceled.status?.state) };
});

// A contextId that is not an id.
await step('badContext', async () => summary(await client.sendMessage({ message: message('hi', { contextId: 'not an id!' }) })));

console.log(JSON.stringify(out));
