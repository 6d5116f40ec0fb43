#!/usr/bin/env node
// Peer benchmark: node-redlock (redlock@5.0.0-beta.2 on ioredis@5) against N
// already-running local redis masters. Mirrors bench/bench_acquire's workloads
// and prints the same JSON line shapes on stdout (everything else on stderr).
//
//   node node_redlock_bench.js --ports 7001,7002,7003,7004,7005 \
//     [--host 127.0.0.1] [--iterations 2000] [--warmup 200] [--inflight 256] \
//     [--duration-ms 3000] [--deadline-s 120] [--modules DIR]
//
// Every option can also come from the environment: REDLOCK_BENCH_PORTS,
// REDLOCK_BENCH_HOST, REDLOCK_BENCH_ITERATIONS, REDLOCK_BENCH_WARMUP,
// REDLOCK_BENCH_INFLIGHT, REDLOCK_BENCH_DURATION_MS, REDLOCK_BENCH_DEADLINE_S.
// --modules (or REDLOCK_PEERS_DIR) names the folder whose node_modules holds
// redlock and ioredis; without it, normal module resolution applies.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const IMPL = "node-redlock";
const TTL_MS = 10000;

function fail(message) {
  process.stderr.write(`node_redlock_bench: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const env = process.env;
  const opts = {
    ports: env.REDLOCK_BENCH_PORTS || "",
    host: env.REDLOCK_BENCH_HOST || "127.0.0.1",
    iterations: env.REDLOCK_BENCH_ITERATIONS || "2000",
    warmup: env.REDLOCK_BENCH_WARMUP || "200",
    inflight: env.REDLOCK_BENCH_INFLIGHT || "256",
    "duration-ms": env.REDLOCK_BENCH_DURATION_MS || "3000",
    "deadline-s": env.REDLOCK_BENCH_DEADLINE_S || "120",
    modules: env.REDLOCK_PEERS_DIR || "",
  };
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    if (arg === "-h" || arg === "--help") {
      process.stderr.write(
        "usage: node_redlock_bench.js --ports P1,P2,... [--host H] [--iterations N]\n" +
          "       [--warmup N] [--inflight N] [--duration-ms MS] [--deadline-s S] [--modules DIR]\n",
      );
      process.exit(0);
    }
    if (!arg.startsWith("--")) fail(`unexpected argument: ${arg}`);
    arg = arg.slice(2);
    let value;
    const eq = arg.indexOf("=");
    if (eq >= 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    } else {
      if (i + 1 >= argv.length) fail(`--${arg} needs a value`);
      value = argv[++i];
    }
    if (!(arg in opts)) fail(`unknown option --${arg}`);
    opts[arg] = value;
  }

  const ports = opts.ports
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => {
      const p = Number(s);
      if (!Number.isInteger(p) || p < 1 || p > 65535) fail(`bad port: ${s}`);
      return p;
    });
  if (ports.length === 0) fail("no masters: give --ports P1,P2,... or REDLOCK_BENCH_PORTS");

  const int = (name, min) => {
    const v = Number(opts[name]);
    if (!Number.isInteger(v) || v < min) fail(`--${name} must be an integer >= ${min}: ${opts[name]}`);
    return v;
  };
  return {
    ports,
    host: opts.host,
    iterations: int("iterations", 1),
    warmup: int("warmup", 0),
    inflight: int("inflight", 1),
    durationMs: int("duration-ms", 1),
    deadlineS: int("deadline-s", 1),
    modules: opts.modules,
  };
}

// redlock's "exports" map hides its package.json, so find it by walking up
// from the resolved entry point.
function packageVersion(req, name) {
  let dir = path.dirname(req.resolve(name));
  for (;;) {
    const file = path.join(dir, "package.json");
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
      if (pkg.name === name) return pkg.version;
    }
    const up = path.dirname(dir);
    if (up === dir) return "unknown";
    dir = up;
  }
}

function loadModules(dir) {
  const req = dir ? createRequire(path.join(path.resolve(dir), "noop.js")) : require;
  let Redis, Redlock, versions;
  try {
    Redis = req("ioredis");
    const redlockModule = req("redlock");
    Redlock = redlockModule.default || redlockModule;
    versions = { redlock: packageVersion(req, "redlock"), ioredis: packageVersion(req, "ioredis") };
  } catch (err) {
    fail(`cannot load redlock/ioredis${dir ? ` from ${dir}` : ""}: ${err.message}`);
  }
  if (Redis.default && typeof Redis !== "function") Redis = Redis.default;
  return { Redis, Redlock, versions };
}

// Nearest-rank percentile of an ascending array: the ceil(p/100 * n)-th value.
function percentile(sorted, p) {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

function latencyLine(bench, masters, samplesNs) {
  const us = Array.from(samplesNs, (ns) => Number(ns) / 1000).sort((a, b) => a - b);
  const mean = us.reduce((a, b) => a + b, 0) / us.length;
  const round = (x) => Math.round(x * 1000) / 1000;
  return {
    bench,
    impl: IMPL,
    masters,
    iterations: us.length,
    p50_us: round(percentile(us, 50)),
    p90_us: round(percentile(us, 90)),
    p99_us: round(percentile(us, 99)),
    p999_us: round(percentile(us, 99.9)),
    mean_us: round(mean),
  };
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// Resolves after every reply still owed by the masters has arrived: replies on
// one connection come in order, so a PING answered means everything sent
// before it was answered. node-redlock resolves at quorum and leaves the
// minority's replies in flight; this keeps them from bleeding into the next
// phase.
async function drain(clients) {
  await Promise.all(clients.map((c) => c.ping()));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));

  const deadline = setTimeout(() => {
    process.stderr.write(`node_redlock_bench: hard deadline of ${opts.deadlineS} s passed; giving up\n`);
    process.exit(3);
  }, opts.deadlineS * 1000);
  deadline.unref(); // fires while sockets keep the loop alive; never holds it open

  const { Redis, Redlock, versions } = loadModules(opts.modules);
  process.stderr.write(
    `node_redlock_bench: redlock ${versions.redlock}, ioredis ${versions.ioredis}, node ${process.version}, ` +
      `masters ${opts.host}:${opts.ports.join(",")}\n`,
  );

  const clients = opts.ports.map(
    (port) =>
      new Redis({
        host: opts.host,
        port,
        lazyConnect: true,
        connectTimeout: 5000,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null, // no reconnects: a lost master fails the run
      }),
  );
  for (const c of clients) {
    c.on("error", (err) => process.stderr.write(`node_redlock_bench: ioredis ${c.options.port}: ${err.message}\n`));
  }

  let exitCode = 0;
  try {
    await Promise.all(clients.map((c) => c.connect())); // resolves once "ready"
    await drain(clients);

    const masters = clients.length;
    const redlock = new Redlock(clients, {
      driftFactor: 0.01,
      retryCount: 0,
      retryDelay: 0,
      retryJitter: 0,
    });
    const prefix = `redlock-bench:node:${process.pid}`;
    let seq = 0;
    const fresh = (tag) => [`${prefix}:${tag}:${seq++}`];

    // try_lock: time the acquire only, release untimed.
    {
      for (let i = 0; i < opts.warmup; i++) {
        const lock = await redlock.acquire(fresh("w"), TTL_MS);
        await lock.release();
      }
      const samples = new Array(opts.iterations);
      for (let i = 0; i < opts.iterations; i++) {
        const resource = fresh("tl");
        const t0 = process.hrtime.bigint();
        const lock = await redlock.acquire(resource, TTL_MS);
        samples[i] = process.hrtime.bigint() - t0;
        await lock.release();
      }
      await drain(clients);
      emit(latencyLine("try_lock", masters, samples));
    }

    // try_lock_unlock: acquire + release timed together.
    {
      for (let i = 0; i < opts.warmup; i++) {
        const lock = await redlock.acquire(fresh("w"), TTL_MS);
        await lock.release();
      }
      const samples = new Array(opts.iterations);
      for (let i = 0; i < opts.iterations; i++) {
        const resource = fresh("tlu");
        const t0 = process.hrtime.bigint();
        const lock = await redlock.acquire(resource, TTL_MS);
        await lock.release();
        samples[i] = process.hrtime.bigint() - t0;
      }
      await drain(clients);
      emit(latencyLine("try_lock_unlock", masters, samples));
    }

    // throughput: `inflight` acquire+release cycles in flight on distinct
    // resources; no new cycle starts after the window, the ones running finish
    // and count, and the seconds run until the last of them is done.
    const levels = [...new Set([1, 16, opts.inflight])];
    for (const inflight of levels) {
      let stop = false;
      let cycles = 0;
      const run = async (untilNs, count) => {
        while (!stop && process.hrtime.bigint() < untilNs) {
          const lock = await redlock.acquire(fresh(`tp${inflight}`), TTL_MS);
          await lock.release();
          if (count) cycles++;
        }
      };
      const workers = (untilNs, count) =>
        Promise.all(
          Array.from({ length: inflight }, () =>
            run(untilNs, count).catch((err) => {
              stop = true;
              throw err;
            }),
          ),
        );
      // Warm up for a tenth of the window (at most 1 s) at the same depth.
      const warmNs = BigInt(Math.min(1000, Math.ceil(opts.durationMs / 10))) * 1000000n;
      await workers(process.hrtime.bigint() + warmNs, false);
      await drain(clients);

      const t0 = process.hrtime.bigint();
      await workers(t0 + BigInt(opts.durationMs) * 1000000n, true);
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      await drain(clients);
      emit({
        bench: "throughput",
        impl: IMPL,
        masters,
        in_flight: inflight,
        cycles,
        seconds: Math.round(seconds * 1e6) / 1e6,
        cycles_per_s: Math.round((cycles / seconds) * 10) / 10,
      });
    }
  } catch (err) {
    process.stderr.write(`node_redlock_bench: ${err && err.stack ? err.stack : err}\n`);
    exitCode = 1;
  } finally {
    await Promise.all(
      clients.map((c) =>
        c.status === "ready" ? c.quit().catch(() => c.disconnect()) : Promise.resolve(c.disconnect()),
      ),
    );
  }
  process.exitCode = exitCode;
}

main().catch((err) => {
  process.stderr.write(`node_redlock_bench: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
