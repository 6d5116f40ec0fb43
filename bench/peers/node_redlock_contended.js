#!/usr/bin/env node
// One worker of bench/bench_contended with node-redlock (redlock@5.0.0-beta.2 on
// ioredis@5): the same loop as its C++ workers (acquire -> --work-us of busy
// work -> release, on one resource shared by every worker), the same start
// protocol and the same record file, so that the parent measures every
// implementation alike. Started by bench_contended (--impls node-redlock,...);
// not meant to be run by hand.
//
//   node node_redlock_contended.js --ports P1,P2,... --resource KEY --out FILE \
//     --ready-fd FD [--work-us 100] [--ttl-ms 10000] [--modules DIR] [--impl LABEL]
//     [--retry-count N] [--retry-delay MS] [--retry-jitter MS]
//
// Retry settings not given stay at node-redlock's defaults (retryCount 10,
// retryDelay 200, retryJitter 100). An acquire that runs out of retries counts
// as an error and the loop calls acquire again.
//
// Protocol: after connecting and one warm-up acquire+release on a resource of
// its own, writes one byte to --ready-fd; then reads "START_NS END_NS\n" on
// stdin (CLOCK_MONOTONIC nanoseconds, which process.hrtime reads too), waits
// until START_NS, loops until END_NS, writes one line per cycle
// "call acquired work_end released attempts" to --out after a "# ..." header,
// and exits.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

function fail(message) {
  process.stderr.write(`node_redlock_contended: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = {
    ports: "",
    resource: "",
    out: "",
    "ready-fd": "",
    "work-us": "100",
    "ttl-ms": "10000",
    modules: process.env.REDLOCK_PEERS_DIR || "",
    impl: "node-redlock",
    "retry-count": "",
    "retry-delay": "",
    "retry-jitter": "",
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith("--") || !(arg.slice(2) in opts)) fail(`unknown argument ${arg}`);
    if (i + 1 >= argv.length) fail(`${arg} needs a value`);
    opts[arg.slice(2)] = argv[++i];
  }
  const ports = opts.ports.split(",").filter((s) => s.length > 0).map(Number);
  if (ports.length === 0 || ports.some((p) => !Number.isInteger(p))) fail("--ports P1,P2,... needed");
  if (!opts.resource || !opts.out || opts["ready-fd"] === "") fail("--resource, --out and --ready-fd are needed");
  const settings = {};
  if (opts["retry-count"] !== "") settings.retryCount = Number(opts["retry-count"]);
  if (opts["retry-delay"] !== "") settings.retryDelay = Number(opts["retry-delay"]);
  if (opts["retry-jitter"] !== "") settings.retryJitter = Number(opts["retry-jitter"]);
  return {
    ports,
    resource: opts.resource,
    out: opts.out,
    readyFd: Number(opts["ready-fd"]),
    workNs: BigInt(Number(opts["work-us"]) * 1000),
    ttlMs: Number(opts["ttl-ms"]),
    modules: opts.modules,
    impl: opts.impl,
    settings,
  };
}

function loadModules(dir) {
  const req = dir ? createRequire(path.join(path.resolve(dir), "noop.js")) : require;
  try {
    let Redis = req("ioredis");
    if (Redis.default && typeof Redis !== "function") Redis = Redis.default;
    const redlockModule = req("redlock");
    return { Redis, Redlock: redlockModule.default || redlockModule };
  } catch (err) {
    fail(`cannot load redlock/ioredis${dir ? ` from ${dir}` : ""}: ${err.message}`);
  }
  return null;
}

// "START_NS END_NS\n" from the parent, read blocking before the loop starts.
function readGo() {
  const buf = Buffer.alloc(128);
  let text = "";
  while (!text.includes("\n")) {
    let n;
    try {
      n = fs.readSync(0, buf, 0, buf.length, null);
    } catch (err) {
      if (err.code === "EAGAIN") continue;
      throw err;
    }
    if (n === 0) fail("stdin closed before the start time came");
    text += buf.toString("utf8", 0, n);
  }
  const [start, end] = text.trim().split(/\s+/).map((s) => BigInt(s));
  return { start, end };
}

const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { Redis, Redlock } = loadModules(opts.modules);
  const clients = opts.ports.map(
    (port) =>
      new Redis({
        host: "127.0.0.1",
        port,
        lazyConnect: true,
        connectTimeout: 5000,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      }),
  );
  for (const c of clients) c.on("error", (err) => process.stderr.write(`node_redlock_contended: ${err.message}\n`));
  await Promise.all(clients.map((c) => c.connect()));
  const redlock = new Redlock(clients, opts.settings);

  const warm = await redlock.acquire([`bench:contended:warm:${process.pid}`], 2000);
  await warm.release();
  fs.writeSync(opts.readyFd, "R");
  fs.closeSync(opts.readyFd);
  const { start, end } = readGo();
  const ahead = Number(start - now()) / 1e6;
  if (ahead > 2) await sleep(ahead - 2);
  while (now() < start) {
    // the last ms, spun: every worker starts at the same instant
  }

  const records = [];
  let errors = 0;
  let unlockErrors = 0;
  let lastError = "-";
  const maxCycles = 2000000;
  while (now() < end && records.length < maxCycles) {
    const call = now();
    let lock;
    try {
      lock = await redlock.acquire([opts.resource], opts.ttlMs);
    } catch (err) {
      errors++;
      lastError = (err && err.name) || "error";
      continue;
    }
    const acquired = now();
    while (now() < acquired + opts.workNs) {
      // 100 us of work
    }
    const workEnd = now();
    try {
      await lock.release();
    } catch (err) {
      unlockErrors++;
    }
    const released = now();
    records.push(`${call} ${acquired} ${workEnd} ${released} ${lock.attempts.length}`);
  }

  const header =
    `# impl=${opts.impl} pid=${process.pid} errors=${errors} unlock_errors=${unlockErrors} closed=0 ` +
    `loop_close=0 last_error=${lastError} settings=${JSON.stringify(opts.settings)}\n`;
  fs.writeFileSync(opts.out, header + records.join("\n") + (records.length ? "\n" : ""));
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
}

main().catch((err) => {
  process.stderr.write(`node_redlock_contended: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
