'use strict';
/**
 * Run one ali-ons push consumer (clustering) and report everything it receives.
 *
 * Config (JSON, argv[2] or ONS_HARNESS_CONFIG):
 *   nameSrv          "127.0.0.1:PORT" (required; loopback only)
 *   topic            topic to subscribe (required; must exist)
 *   consumerGroup    group (required)
 *   subExpression    tag expression, e.g. "TagA" or "TagA || TagB" (default "*")
 *   consumeFromWhere a ConsumeFromWhere name (default CONSUME_FROM_FIRST_OFFSET)
 *   fail             optional rule or list of rules {keys: [..], times: 1, how: "retry"|"throw"}:
 *                    a message with one of a rule's keys (any message if the rule has no keys)
 *                    fails while its reconsumeTimes < times, by returning
 *                    Consumer.ACTION_RETRY ("retry") or by throwing ("throw")
 *   instanceName     makes the client id 127.0.0.1@<instanceName> (default harness-<pid>)
 *   clientIP, verbose, rebalanceIntervalMs, timeoutMs (default 120000)
 *
 * stdin: a line "close" (or end of input) closes the consumer (which persists its offsets
 * and unregisters from the broker), then the script exits 0.
 *
 * stdout (JSON lines):
 *   {"event":"ready", clientId}
 *   {"event":"rebalance", topic, queues:[{brokerName, queueId}]}  after each change of the
 *        queues this client owns for `topic` (the subscribed topic and %RETRY%<group>)
 *   {"event":"received", action, ...message fields (see common.describeMessage)}
 *   {"event":"error", name, code, message}   errors ali-ons emitted and survived
 *   {"event":"closed", received}
 * Exit 0 after a requested close, 1 on a failure, 2 on the deadline.
 */

const readline = require('readline');
const {
  aliOns, loadConfig, emit, fail, finish, startDeadline, clientOptions, describeMessage,
  describeError,
} = require('./common');

const config = loadConfig([ 'nameSrv', 'topic', 'consumerGroup' ]);
let stage = 'starting the consumer';
startDeadline(config.timeoutMs || 120000, () => stage);

const Consumer = aliOns.Consumer;
const RETRY_PREFIX = '%RETRY%';

function queuesOf(consumer, topic) {
  const queues = [];
  for (const item of consumer.processQueueTable.values()) {
    if (item && item.messageQueue.topic === topic) {
      queues.push({ brokerName: item.messageQueue.brokerName, queueId: Number(item.messageQueue.queueId) });
    }
  }
  queues.sort((a, b) => (a.brokerName === b.brokerName ? a.queueId - b.queueId : (a.brokerName < b.brokerName ? -1 : 1)));
  return queues;
}

function decide(msg) {
  const rules = config.fail ? [].concat(config.fail) : [];
  const keys = (msg.keys || '').split(' ').filter(Boolean);
  for (const rule of rules) {
    const matches = rule.keys ? keys.some(k => rule.keys.includes(k)) : true;
    if (matches && msg.reconsumeTimes < (rule.times === undefined ? 1 : rule.times)) {
      return rule.how === 'throw' ? 'throw' : 'retry';
    }
  }
  return 'ok';
}

async function main() {
  const consumer = new Consumer(Object.assign(clientOptions(config), {
    consumerGroup: config.consumerGroup,
    consumeFromWhere: config.consumeFromWhere || 'CONSUME_FROM_FIRST_OFFSET',
    isBroadcast: false,
    persistent: false,
  }));
  consumer.on('error', err => emit(describeError(err)));

  let received = 0;
  const retryTopic = RETRY_PREFIX + config.consumerGroup;
  for (const topic of [ config.topic, retryTopic ]) {
    consumer.on(`topic_${topic}_queue_changed`, () => {
      emit({ event: 'rebalance', topic, queues: queuesOf(consumer, topic) });
    });
  }

  consumer.subscribe(config.topic, config.subExpression || '*', async (msg, mq) => {
    received++;
    const action = decide(msg);
    emit(Object.assign({ event: 'received', action }, describeMessage(msg, mq)));
    if (action === 'retry') {
      return Consumer.ACTION_RETRY;
    }
    if (action === 'throw') {
      throw new Error(`harness: consumer asked to fail ${msg.msgId}`);
    }
    return undefined;
  });

  await consumer.ready();
  stage = 'consuming';
  emit({ event: 'ready', clientId: `${consumer.options.clientIP}@${consumer.instanceName}` });

  await new Promise(resolve => {
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', line => {
      if (line.trim() === 'close') {
        rl.close();
      }
    });
    rl.on('close', resolve);
  });

  stage = 'closing the consumer';
  await consumer.close();
  emit({ event: 'closed', received });
}

main().then(() => finish(0), err => fail(`${err.name}: ${err.message}${err.code !== undefined ? ` (code ${err.code})` : ''}\n${err.stack}`));
