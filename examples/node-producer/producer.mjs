// Enqueue an apportion job from Node.js and read its answer.
//
// No Celery client library: this speaks Celery's message protocol v2 on Redis
// directly, as any producer in any language can (docs/contract.md, "Sending a job").
//
//   node producer.mjs [KIND] [JOB.json] [--timeout SECONDS]
//   APPORTION_REDIS_URL, as the workers and the apportion CLI read it (default
//   redis://127.0.0.1:6379/0): redis:// or rediss:// with the workers' ?ssl_ca_certs=,
//   ssl_certfile=, ssl_keyfile= and ssl_cert_reqs= options. REDIS_URL, the name this
//   example used to read, still works, with a deprecation message, when
//   APPORTION_REDIS_URL is not set.
//
// 1. The job is the task's single positional argument: the body is the JSON array
//    [[job], {}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}],
//    base64-encoded, with content-type application/json (apportion refuses pickle).
// 2. Headers name the task (`task: "apportion.partition"`), its `id`, and carry
//    `argsrepr`/`kwargsrepr` so Flower and logs can show the arguments, and
//    `apportion_sent_at` so the worker can measure the end-to-end latency.
// 3. The message is LPUSHed onto the queue's Redis list (the queue name: attach,
//    launch, partition or events); kombu workers BRPOP from the other end.
// 4. The answer arrives as an entry on the stream apportion:results:<kind> carrying
//    job_id, kind, status and envelope (the JSON envelope; over 64 KiB, envelope_key:
//    the result backend key that holds it), once per idempotency key:
//    the job's job_id, or for a launch_outcome its event_id. We read the stream from
//    where it ended before we sent (an older entry for the same key is not this job's
//    answer). A key answered before publishes nothing new; the answer to this very
//    message is then in the result backend under its task id, which we read too.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { createClient } from "redis";

const QUEUES = {
  auto_attach: "attach",
  guest_host_attach: "attach",
  heal_org: "attach",
  launch_select: "launch",
  partition: "partition",
  launch_outcome: "events",
};

export function celeryMessage(kind, job, taskId = randomUUID()) {
  const body = [[job], {}, { callbacks: null, errbacks: null, chain: null, chord: null }];
  return {
    body: Buffer.from(JSON.stringify(body), "utf-8").toString("base64"),
    "content-encoding": "utf-8",
    "content-type": "application/json",
    headers: {
      lang: "js",
      task: `apportion.${kind}`,
      id: taskId,
      shadow: null,
      eta: null,
      expires: null,
      group: null,
      group_index: null,
      retries: 0,
      timelimit: [null, null],
      root_id: taskId,
      parent_id: null,
      argsrepr: JSON.stringify([job]).slice(0, 1024),
      kwargsrepr: "{}",
      origin: `node-${process.pid}@${hostname()}`,
      ignore_result: false,
      apportion_sent_at: Date.now() / 1000,
    },
    properties: {
      correlation_id: taskId,
      reply_to: "",
      delivery_mode: 2,
      delivery_info: { exchange: "", routing_key: QUEUES[kind] },
      priority: 0,
      body_encoding: "base64",
      delivery_tag: randomUUID(),
    },
  };
}

export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0";

// The URL the workers use: APPORTION_REDIS_URL. REDIS_URL is read only in its absence.
export function redisUrl(env, warn = (line) => console.error(line)) {
  const ours = env.APPORTION_REDIS_URL;
  const old = env.REDIS_URL;
  if (ours) {
    if (old && old !== ours) {
      warn("producer: REDIS_URL is ignored: APPORTION_REDIS_URL is set (REDIS_URL is deprecated)");
    }
    return ours;
  }
  if (old) {
    warn("producer: REDIS_URL is deprecated: set APPORTION_REDIS_URL, the name the workers read");
    return old;
  }
  return DEFAULT_REDIS_URL;
}

// node-redis options for a URL written for the workers: their TLS query options
// (redis-py's names) become the socket's; the certificate is always verified unless
// ssl_cert_reqs says none (for testing only, as for the workers).
export function redisOptions(text) {
  const url = new URL(text);
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
    throw new Error(
      `this producer connects to redis:// or rediss:// URLs, not ${url.protocol}// ` +
        "(with Sentinel, give it the master's address)",
    );
  }
  const query = url.searchParams;
  const tls = {};
  const files = { ssl_ca_certs: "ca", ssl_certfile: "cert", ssl_keyfile: "key" };
  for (const [option, field] of Object.entries(files)) {
    if (query.has(option)) tls[field] = readFileSync(query.get(option));
    query.delete(option);
  }
  const reqs = query.get("ssl_cert_reqs");
  query.delete("ssl_cert_reqs");
  if (reqs === "none" || reqs === "optional") tls.rejectUnauthorized = false;
  const options = { url: url.toString() };
  if (url.protocol === "rediss:") options.socket = { tls: true, ...tls };
  return options;
}

// The field a kind's answer is filed under on its stream (its idempotency key).
const KEY_FIELD = { launch_outcome: "event_id" };

function resultStream(kind) {
  return `${process.env.APPORTION_STREAM_PREFIX ?? "apportion"}:results:${kind}`;
}

// The answer the worker stored for this message in the Celery result backend, if any.
async function storedAnswer(client, taskId) {
  const stored = await client.get(`celery-task-meta-${taskId}`);
  if (!stored) return null;
  const meta = JSON.parse(stored);
  if (meta.status === "SUCCESS") return meta.result;
  if (meta.status === "FAILURE") throw new Error(`task ${taskId} failed: ${JSON.stringify(meta.result)}`);
  return null; // STARTED, RETRY: still working on it
}

export async function submitAndWait(client, kind, job, { timeoutMs = 60000 } = {}) {
  const queue = QUEUES[kind];
  if (!queue) throw new Error(`unknown kind ${kind}`);
  const keyField = KEY_FIELD[kind] ?? "job_id";
  if (keyField === "job_id" && job.job_id === undefined) job.job_id = randomUUID();
  const taskId = randomUUID();
  // Without its key the job is answered under the task id (and rejected if the key is
  // required, as a launch_outcome's event_id is).
  const key = job[keyField] ?? taskId;
  const stream = resultStream(kind);
  const [last] = await client.xRevRange(stream, "+", "-", { COUNT: 1 });
  let lastId = last ? last.id : "0-0";
  await client.lPush(queue, JSON.stringify(celeryMessage(kind, job, taskId)));

  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const reply = await client.xRead({ key: stream, id: lastId }, { BLOCK: 1000, COUNT: 100 });
    for (const { messages } of reply ?? []) {
      for (const { id, message } of messages) {
        lastId = id;
        if (message.job_id !== key) continue;
        if (message.envelope !== undefined) {
          return { taskId, entryId: id, envelope: JSON.parse(message.envelope) };
        }
        // An envelope over 64 KiB is kept once, in the result backend key the entry names.
        const held = await client.get(message.envelope_key);
        if (held !== null) return { taskId, entryId: id, envelope: JSON.parse(held).result };
      }
    }
    const envelope = await storedAnswer(client, taskId);
    if (envelope) return { taskId, entryId: null, envelope };
  }
  throw new Error(`no answer for ${keyField} ${key} (task ${taskId}) within ${timeoutMs} ms`);
}

async function main() {
  const args = process.argv.slice(2);
  const timeoutAt = args.indexOf("--timeout");
  const timeoutMs = timeoutAt >= 0 ? Number(args.splice(timeoutAt, 2)[1]) * 1000 : 60000;
  const [kind = "partition", file] = args;
  const job = file
    ? JSON.parse(readFileSync(file, "utf-8"))
    : {
        job_id: `node-${randomUUID()}`,
        schema: [
          { id: "os", type: "vg", contains: [{ id: "root" }, { id: "swap" }] },
          { id: "root", type: "lv", min_size: 5000, mount: "/" },
          { id: "swap", type: "lv", size: "yaql=$.ram * 2" },
        ],
        hardware: { ram: 2048, disks: [{ id: "sda", size: 40000 }] },
      };
  const client = createClient(redisOptions(redisUrl(process.env)));
  client.on("error", (err) => console.error(`redis: ${err.message}`));
  await client.connect();
  try {
    const result = await submitAndWait(client, kind, job, { timeoutMs });
    console.log(JSON.stringify(result));
    process.exitCode = { ok: 0, infeasible: 3, rejected: 4 }[result.envelope.status] ?? 1;
  } finally {
    await client.quit();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    console.error(`producer: ${err.message}`);
    process.exitCode = 1;
  });
}
