'use strict';
/**
 * Decode and encode msgpack with the npm @msgpack/msgpack package, for
 * tests/interop/test_msgpack_node.py (message bodies our client writes with Message.of).
 *
 * Input (argv[2]): {"decode": [hex, ...], "encode": [value, ...]}
 * Output (stdout, one JSON object): {"decoded": [value, ...], "encoded": [hex, ...]}
 *
 * JSON has no bytes or dates, so both directions tag them: {"$bin": hex} is a Uint8Array
 * (msgpack bin), {"$date": ISO string} is a Date (msgpack Timestamp extension -1).
 * Exit 3 when the package is missing (run `make interop-deps`), 1 on any other failure.
 */

let msgpack;
try {
  msgpack = require('@msgpack/msgpack');
} catch (err) {
  process.stderr.write(`cannot load @msgpack/msgpack (${err.message}); run \`make interop-deps\`\n`);
  process.exit(3);
}

function toJson(value) {
  if (value instanceof Uint8Array) {
    return { $bin: Buffer.from(value).toString('hex') };
  }
  if (value instanceof Date) {
    return { $date: value.toISOString() };
  }
  if (Array.isArray(value)) {
    return value.map(toJson);
  }
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const [ k, v ] of Object.entries(value)) {
      out[k] = toJson(v);
    }
    return out;
  }
  return value;
}

function fromJson(value) {
  if (Array.isArray(value)) {
    return value.map(fromJson);
  }
  if (value !== null && typeof value === 'object') {
    if (typeof value.$bin === 'string') {
      return Uint8Array.from(Buffer.from(value.$bin, 'hex'));
    }
    if (typeof value.$date === 'string') {
      return new Date(value.$date);
    }
    const out = {};
    for (const [ k, v ] of Object.entries(value)) {
      out[k] = fromJson(v);
    }
    return out;
  }
  return value;
}

try {
  const config = JSON.parse(process.argv[2]);
  const decoded = (config.decode || []).map(hex => toJson(msgpack.decode(Buffer.from(hex, 'hex'))));
  const encoded = (config.encode || []).map(v => Buffer.from(msgpack.encode(fromJson(v))).toString('hex'));
  process.stdout.write(JSON.stringify({ decoded, encoded }) + '\n');
} catch (err) {
  process.stderr.write(`${err.name}: ${err.message}\n${err.stack}\n`);
  process.exit(1);
}
