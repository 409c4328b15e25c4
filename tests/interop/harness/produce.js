'use strict';
/**
 * Produce messages through ali-ons' Producer and report every send result.
 *
 * Config (JSON, argv[2] or ONS_HARNESS_CONFIG):
 *   nameSrv        "127.0.0.1:PORT" (required; loopback only)
 *   topic          topic to send to (required; must exist: ali-ons does not auto-create)
 *   producerGroup  producer group (default "HARNESS_PRODUCER")
 *   messages       [{tags, keys: [..], body}] sent in order, one at a time
 *   instanceName, clientIP, verbose, timeoutMs (default 60000)
 *
 * stdout (JSON lines):
 *   {"event":"sent", index, msgId, sendStatus, topic, brokerName, queueId, queueOffset,
 *    tags, keys, body}                       one per message, in send order
 *   {"event":"error", ...}                    ali-ons error events it survived
 *   {"event":"done", sent}                    after the producer closed
 * Exit 0 when every message was sent, 1 on a send failure, 2 on the deadline.
 */

const {
  aliOns, loadConfig, emit, fail, finish, startDeadline, clientOptions, describeError,
} = require('./common');

const config = loadConfig([ 'nameSrv', 'topic', 'messages' ]);
let stage = 'starting the producer';
startDeadline(config.timeoutMs || 60000, () => stage);

async function main() {
  const producer = new aliOns.Producer(Object.assign(clientOptions(config), {
    producerGroup: config.producerGroup || 'HARNESS_PRODUCER',
  }));
  producer.on('error', err => emit(describeError(err)));
  await producer.ready();

  let sent = 0;
  for (const [ index, spec ] of config.messages.entries()) {
    stage = `sending message ${index} of ${config.messages.length}`;
    const msg = spec.tags === undefined || spec.tags === null
      ? new aliOns.Message(config.topic, spec.body)
      : new aliOns.Message(config.topic, spec.tags, spec.body);
    if (spec.keys && spec.keys.length) {
      msg.keys = spec.keys;
    }
    const result = await producer.send(msg);
    emit({
      event: 'sent',
      index,
      msgId: result.msgId,
      sendStatus: result.sendStatus,
      topic: result.messageQueue.topic,
      brokerName: result.messageQueue.brokerName,
      queueId: Number(result.messageQueue.queueId),
      queueOffset: result.queueOffset,
      tags: spec.tags === undefined ? null : spec.tags,
      keys: msg.keys === undefined ? null : msg.keys,
      body: spec.body,
    });
    sent++;
  }

  stage = 'closing the producer';
  await producer.close();
  emit({ event: 'done', sent });
}

main().then(() => finish(0), err => fail(`${err.name}: ${err.message}${err.code !== undefined ? ` (code ${err.code})` : ''}\n${err.stack}`));
