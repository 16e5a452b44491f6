// A third-party A2A client (@a2a-js/sdk) answering the assistant's tool
// approval.
//
//   node approval.mjs BASE_URL PROTOCOL ANSWERS
//
// It asks the assistant served at BASE_URL/a2a/assistant (plain text) for
// a refund, then sends each answer of ANSWERS (a JSON array of parts,
// {"text": "..."} or {"data": ...}) in a message with the task id, over
// A2A PROTOCOL ("1.0" or "0.3"). It prints one JSON object: the task after
// the question and after each answer. The Go test (a2a_test.go) checks it.
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Message, TaskState } from '@a2a-js/sdk';

const [base, protocol, answers] = process.argv.slice(2);
if (!base || !protocol || !answers) {
  console.error('usage: node approval.mjs BASE_URL PROTOCOL ANSWERS');
  process.exit(2);
}
const cardURL = `${base}/a2a/assistant/.well-known/agent-card.json`;

const stateName = (s) => (typeof s === 'number' ? TaskState[s] : String(s));

const parts = (m) => m?.parts ?? [];
const textOf = (m) => parts(m).filter((p) => p?.content?.$case === 'text').map((p) => p.content.value).join('\n');
const dataOf = (m) => parts(m).filter((p) => p?.content?.$case === 'data').map((p) => p.content.value);
const artifactData = (task) => {
  for (const a of task?.artifacts ?? []) {
    for (const p of a.parts ?? []) {
      if (p?.content?.$case === 'data') return p.content.value;
    }
  }
  return null;
};

const summary = (task) => ({
  id: task.id,
  contextId: task.contextId,
  state: stateName(task.status?.state),
  text: textOf(task.status?.message),
  data: dataOf(task.status?.message),
  artifact: artifactData(task),
});

const message = (part, extra = {}) => Message.fromJSON({ messageId: randomUUID(), role: 'ROLE_USER', parts: [part], ...extra });

let client;
if (protocol === '0.3') {
  const card = await (await fetch(cardURL)).json();
  card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
    }),
  );
  client = await factory.createFromAgentCard(card);
} else {
  client = await new ClientFactory().createFromUrl(cardURL, '');
}

const out = { protocol: client.protocolVersion, steps: [] };
try {
  const asked = await client.sendMessage({
    message: message({ text: 'Hi! Where are my orders A-1001 and A-1002? And please refund A-1001, the teapot arrived broken.' }),
  });
  out.steps.push(summary(asked));
  for (const part of JSON.parse(answers)) {
    const res = await client.sendMessage({ message: message(part, { taskId: asked.id, contextId: asked.contextId }) });
    out.steps.push(summary(res));
  }
} catch (err) {
  out.error = { name: err?.constructor?.name ?? 'Error', code: err?.code ?? null, message: String(err?.message ?? err) };
}
console.log(JSON.stringify(out));
