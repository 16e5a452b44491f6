// A third-party A2A client (@a2a-js/sdk) driving superstep's A2A server.
//
//   node client.mjs BASE_URL
//
// BASE_URL serves the test graph "chat" at BASE_URL/a2a/chat (see
// pkg/a2a/helpers_test.go). The script prints one JSON object with what it
// saw at each step; the Go test (js_test.go) checks it. It never throws:
// a failing step records its error and the others still run.
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Message, TaskState } from '@a2a-js/sdk';

const base = process.argv[2];
if (!base) {
  console.error('usage: node client.mjs BASE_URL');
  process.exit(2);
}
const cardURL = `${base}/a2a/chat/.well-known/agent-card.json`;

const stateName = (s) => (typeof s === 'number' ? TaskState[s] : String(s));

const message = (text, extra = {}) =>
  Message.fromJSON({ messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }], ...extra });

const textOf = (m) =>
  (m?.parts ?? [])
    .filter((p) => p?.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');

const dataOf = (task) => {
  for (const a of task?.artifacts ?? []) {
    for (const p of a.parts ?? []) {
      if (p?.content?.$case === 'data') return p.content.value;
    }
  }
  return null;
};

const summary = (task) => ({
  kind: 'task',
  id: task.id,
  contextId: task.contextId,
  state: stateName(task.status?.state),
  text: textOf(task.status?.message),
  data: dataOf(task),
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

async function collect(stream, onEvent) {
  const events = [];
  for await (const ev of stream) {
    const p = ev.payload;
    const e = { kind: p?.$case };
    if (p?.$case === 'task') Object.assign(e, summary(p.value));
    if (p?.$case === 'statusUpdate') Object.assign(e, { state: stateName(p.value.status?.state), text: textOf(p.value.status?.message) });
    if (p?.$case === 'artifactUpdate') e.data = dataOf({ artifacts: [p.value.artifact] });
    events.push(e);
    if (onEvent) await onEvent(e, events.length);
  }
  return events;
}

const client = await new ClientFactory().createFromUrl(cardURL, '');
out.protocol = client.protocolVersion;

// Blocking send, then get.
let done;
await step('send', async () => {
  const res = await client.sendMessage({ message: message('hi') });
  done = res;
  return summary(res);
});
await step('get', async () => summary(await client.getTask({ id: done.id })));

// input-required, then the answer as a message with the task id.
await step('inputRequired', async () => {
  const asked = await client.sendMessage({ message: message('ask') });
  const answered = await client.sendMessage({ message: message('carol', { taskId: asked.id, contextId: asked.contextId }) });
  return { asked: summary(asked), answered: summary(answered) };
});

// Non-blocking send of a long task, then cancel.
await step('nonBlockingCancel', async () => {
  const started = await client.sendMessage({ message: message('slow'), configuration: { returnImmediately: true } });
  const canceled = await client.cancelTask({ id: started.id });
  return { started: summary(started), canceled: summary(canceled) };
});

// Cancelling a finished task is refused.
await step('cancelFinished', async () => summary(await client.cancelTask({ id: done.id })));

// Unknown task.
await step('getUnknown', async () => summary(await client.getTask({ id: 'no-such-task' })));

// Streaming: the task, progress, the artifact, the final status.
await step('stream', async () => ({ events: await collect(client.sendMessageStream({ message: message('stream me') })) }));

// Resubscribe to a running task: the task first, then its updates; the
// task is cancelled after the first event.
await step('resubscribe', async () => {
  const started = await client.sendMessage({ message: message('slow'), configuration: { returnImmediately: true } });
  for (let i = 0; i < 200; i++) {
    const t = await client.getTask({ id: started.id });
    if (stateName(t.status?.state) === 'TASK_STATE_WORKING') break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const events = await collect(client.resubscribeTask({ id: started.id }), async (e, n) => {
    if (n === 1) await client.cancelTask({ id: started.id });
  });
  return { events };
});

// List the tasks of one context.
await step('list', async () => {
  const contextId = randomUUID();
  await client.sendMessage({ message: message('one', { contextId }) });
  await client.sendMessage({ message: message('two', { contextId }) });
  const res = await client.listTasks({ contextId });
  return { count: res.tasks.length, states: res.tasks.map((t) => stateName(t.status?.state)) };
});

// A rejected task is stored: get finds it, cancel and a follow-up message
// are refused with the spec's errors.
let rejected;
await step('rejected', async () => {
  rejected = await client.sendMessage({ message: message('invalid') });
  return summary(rejected);
});
await step('getRejected', async () => summary(await client.getTask({ id: rejected.id })));
await step('cancelRejected', async () => summary(await client.cancelTask({ id: rejected.id })));
await step('messageToFinished', async () =>
  summary(await client.sendMessage({ message: message('more', { taskId: done.id, contextId: done.contextId }) })),
);
await step('resubscribeFinished', async () => ({ events: await collect(client.resubscribeTask({ id: done.id })) }));

// totalSize counts every task of the listing, not the page.
await step('listTotal', async () => {
  const contextId = randomUUID();
  for (const t of ['a', 'b', 'c']) await client.sendMessage({ message: message(t, { contextId }) });
  const res = await client.listTasks({ contextId, pageSize: 1 });
  return { count: res.tasks.length, totalSize: res.totalSize };
});

// The same server through its A2A 0.3 binding, with the SDK's 0.3 client.
await step('legacy', async () => {
  const card = await (await fetch(cardURL)).json();
  card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
    }),
  );
  const legacy = await factory.createFromAgentCard(card);
  const sent = await legacy.sendMessage({ message: message('old client') });
  const got = await legacy.getTask({ id: sent.id });
  return { protocol: legacy.protocolVersion, sent: summary(sent), got: summary(got) };
});

process.stdout.write(JSON.stringify(out) + '\n');
