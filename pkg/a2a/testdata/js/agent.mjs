// A2A agents served by @a2a-js/sdk's own server, for superstep's
// remote-agent node to call.
//
//   node agent.mjs [PORT]
//
// Listens on 127.0.0.1:PORT (default 0: a free port) and prints one JSON
// line, {"url": "http://127.0.0.1:PORT"}, once it serves. It exits when its
// stdin closes (the Go test that started it went away). Two agents answer
// the same way, by the text of the message:
//
//   /v1   speaks A2A 1.0 only
//   /v03  speaks A2A 0.3 only (the SDK's compatibility layer)
//
//   "fail"      -> failed, status message "out of cheese"
//   "ask"       -> input-required "what is your name?"; the answer X -> completed "hello X"
//   "auth"      -> auth-required "your token?"; the answer X -> completed "token X"
//   anything T  -> completed with a text artifact "echo: T"
import { randomUUID } from 'node:crypto';
import express from 'express';
import { TaskState, Role } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const textPart = (value) => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

const textOf = (m) =>
  (m?.parts ?? [])
    .filter((p) => p?.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('\n');

class TestExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const text = textOf(ctx.userMessage).trim();
    const previous = ctx.task;
    bus.publish(
      AgentEvent.task(
        previous ?? {
          id: taskId,
          contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [ctx.userMessage],
          metadata: undefined,
        },
      ),
    );
    const status = (state, msg) =>
      bus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId,
          status: {
            state,
            message: msg && {
              messageId: randomUUID(),
              contextId,
              taskId,
              role: Role.ROLE_AGENT,
              parts: [textPart(msg)],
              metadata: undefined,
              extensions: [],
              referenceTaskIds: [],
            },
            timestamp: new Date().toISOString(),
          },
          metadata: undefined,
        }),
      );
    const answer = (reply) => {
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact: { artifactId: randomUUID(), name: 'answer', description: '', parts: [textPart(reply)], metadata: undefined, extensions: [] },
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
      );
      status(TaskState.TASK_STATE_COMPLETED);
    };
    const waiting = previous?.status?.state;
    if (waiting === TaskState.TASK_STATE_INPUT_REQUIRED) {
      answer(`hello ${text}`);
    } else if (waiting === TaskState.TASK_STATE_AUTH_REQUIRED) {
      answer(`token ${text}`);
    } else if (text === 'fail') {
      status(TaskState.TASK_STATE_FAILED, 'out of cheese');
    } else if (text === 'ask') {
      status(TaskState.TASK_STATE_INPUT_REQUIRED, 'what is your name?');
    } else if (text === 'auth') {
      status(TaskState.TASK_STATE_AUTH_REQUIRED, 'your token?');
    } else {
      answer(`echo: ${text}`);
    }
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.finished();
  }
}

function mount(app, base, path, version) {
  const legacy = version === '0.3';
  const card = {
    name: `js-${path.slice(1)}`,
    description: `A test agent served by @a2a-js/sdk, speaking A2A ${version}.`,
    version: '1.0.0',
    supportedInterfaces: [{ url: `${base}${path}`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: version }],
    provider: undefined,
    documentationUrl: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'echo', description: 'Echoes, fails, or asks, by the message.', tags: ['test'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
    iconUrl: undefined,
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new TestExecutor());
  const compat = legacy ? { legacyCompat: { enabled: true } } : {};
  app.use(`${path}/.well-known/agent-card.json`, agentCardHandler({ agentCardProvider: handler, ...compat }));
  app.use(path, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, ...compat }));
}

const app = express();
const server = app.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  mount(app, base, '/v1', '1.0');
  mount(app, base, '/v03', '0.3');
  process.stdout.write(JSON.stringify({ url: base }) + '\n');
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
