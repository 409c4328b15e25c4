'use strict';
/**
 * Shared plumbing for the ali-ons harness scripts (tests/interop/harness).
 *
 * Contract every script follows:
 *  - configuration is one JSON object, from argv[2] or else the ONS_HARNESS_CONFIG env var;
 *  - stdout carries only JSON lines ({"event": ...}), one object per line, flushed as they
 *    happen so the test can read them while the script runs;
 *  - stderr carries human-readable diagnostics (ali-ons' own warnings and errors included);
 *  - the script enforces its own deadline (config.timeoutMs) and exits non-zero with a
 *    clear stderr message on failure or on the deadline.
 *
 * The ali-ons options used here are read from ali-ons 3.12.0 lib/client_config.js,
 * lib/remoting_client.js and lib/consumer/mq_push_consumer.js.
 */

const path = require('path');

let aliOns;
try {
  aliOns = require('ali-ons');
} catch (err) {
  process.stderr.write(`[harness] cannot load ali-ons (${err.message}); run \`make interop-deps\`\n`);
  process.exit(3);
}

/** Read the JSON configuration (argv[2], else ONS_HARNESS_CONFIG). */
function loadConfig(required) {
  const text = process.argv[2] || process.env.ONS_HARNESS_CONFIG;
  if (!text) {
    fail('no configuration: pass a JSON object as argv[2] or in ONS_HARNESS_CONFIG');
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch (err) {
    fail(`configuration is not JSON: ${err.message}`);
  }
  for (const key of required) {
    if (config[key] === undefined || config[key] === null || config[key] === '') {
      fail(`configuration lacks "${key}"`);
    }
  }
  if (!/^127\.0\.0\.1:\d+$/.test(config.nameSrv)) {
    // ali-ons must only ever dial loopback in our tests.
    fail(`nameSrv must be 127.0.0.1:<port>, got ${JSON.stringify(config.nameSrv)}`);
  }
  return config;
}

/** Write one JSON line on stdout. */
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

let exiting = false;

/**
 * Print a reason on stderr and a final JSON line, then exit with `code` at once (writes to
 * pipes are synchronous on Linux, so nothing printed before is lost).
 */
function fail(message, code) {
  if (!exiting) {
    exiting = true;
    process.stderr.write(`[harness ${path.basename(process.argv[1])}] FAILED: ${message}\n`);
    emit({ event: 'failed', message });
  }
  process.exit(code === undefined ? 1 : code);
}

/** Exit with `code` once stdout has been written out. */
function finish(code) {
  exiting = true;
  process.stdout.write('', () => process.exit(code));
}

/** Enforce the script's own deadline. */
function startDeadline(timeoutMs, what) {
  const timer = setTimeout(() => fail(`deadline of ${timeoutMs} ms passed while ${what()}`, 2), timeoutMs);
  timer.unref();
  return timer;
}

/**
 * ali-ons asserts an httpclient is present but only calls it to look up the nameserver
 * over HTTP, which `nameSrv` disables. Any call is a harness bug: fail loudly.
 */
const httpclient = {
  request(url) {
    const err = new Error(`httpclient.request(${url}) called: ali-ons tried an HTTP nameserver lookup`);
    fail(err.message);
    throw err;
  },
};

/** A logger in ali-ons' shape: warnings and errors to stderr, info/debug only when asked. */
function makeLogger(verbose) {
  const util = require('util');
  const write = level => (...args) => {
    process.stderr.write(`[ali-ons ${level}] ${util.format(...args)}\n`);
  };
  return {
    debug: verbose ? write('debug') : () => {},
    info: verbose ? write('info') : () => {},
    warn: write('warn'),
    error: write('error'),
  };
}

/**
 * ali-ons options every script shares. `instanceName` and `clientIP` are explicit so
 * the client id (clientIP@instanceName) is known and distinct per consumer; intervals
 * are shortened so rebalances and route updates happen within a test's deadline.
 */
function clientOptions(config) {
  return {
    httpclient,
    nameSrv: config.nameSrv,
    clientIP: config.clientIP || '127.0.0.1',
    instanceName: config.instanceName || `harness-${process.pid}`,
    logger: makeLogger(!!config.verbose),
    pollNameServerInteval: config.pollNameServerIntervalMs || 1000,
    heartbeatBrokerInterval: config.heartbeatBrokerIntervalMs || 5000,
    rebalanceInterval: config.rebalanceIntervalMs || 1000,
    persistConsumerOffsetInterval: config.persistConsumerOffsetIntervalMs || 1000,
    // ACL: ali-ons signs every request (AccessKey, OnsChannel, Signature) when both are set
    accessKey: config.accessKey,
    secretKey: config.secretKey,
  };
}

/** The fields of a received ali-ons message the tests check. */
function describeMessage(msg, mq) {
  const props = Object.assign({}, msg.properties);
  return {
    msgId: msg.msgId,
    topic: msg.topic,
    tags: msg.tags === undefined ? null : msg.tags,
    keys: msg.keys === undefined ? null : msg.keys,
    body: msg.body ? msg.body.toString('utf8') : null,
    queueId: msg.queueId,
    queueOffset: msg.queueOffset,
    commitLogOffset: msg.commitLogOffset,
    reconsumeTimes: msg.reconsumeTimes,
    storeHost: msg.storeHost,
    bornHost: msg.bornHost,
    sysFlag: msg.sysFlag,
    fromTopic: mq ? mq.topic : null,
    fromQueueId: mq ? mq.queueId : null,
    properties: props,
  };
}

/** An error event as a JSON line (ali-ons emits these for failures it survives). */
function describeError(err) {
  return {
    event: 'error',
    name: err && err.name,
    code: err && err.code !== undefined ? err.code : null,
    message: err && err.message,
  };
}

module.exports = {
  aliOns,
  loadConfig,
  emit,
  fail,
  finish,
  startDeadline,
  httpclient,
  clientOptions,
  describeMessage,
  describeError,
};
