// Enqueue an apportion job from Node.js and read its result event.
//
// No Celery client library: this speaks Celery's message protocol v2 on Redis
// directly, as any producer in any language can.
//
//   node producer.mjs [KIND] [JOB.json] [--timeout SECONDS]
//   (REDIS_URL, default redis://127.0.0.1:6379/0)
//
// 1. The job is the task's single positional argument: the body is the JSON array
//    [[job], {}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}],
//    base64-encoded, with content-type application/json (apportion refuses pickle).
// 2. Headers name the task (`task: "apportion.partition"`), its `id`, and carry
//    `argsrepr`/`kwargsrepr` so Flower and logs can show the arguments.
// 3. The message is LPUSHed onto the queue's Redis list (the queue name: attach,
//    launch, partition or events); kombu workers BRPOP from the other end.
// 4. The result arrives as an entry on the stream apportion:results:<kind> carrying
//    job_id, kind, status and envelope (the JSON result envelope), exactly once per
//    job_id. We read it with XREAD, remembering the last id we saw.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { createClient } from "redis";

const QUEUES = {
  auto_attach: "attach",
  guest_host_attach: "attach",
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

export async function submitAndWait(client, kind, job, { timeoutMs = 60000 } = {}) {
  const queue = QUEUES[kind];
  if (!queue) throw new Error(`unknown kind ${kind}`);
  const jobId = job.job_id ?? (job.job_id = randomUUID());
  const stream = `apportion:results:${kind}`;
  const taskId = randomUUID();
  await client.lPush(queue, JSON.stringify(celeryMessage(kind, job, taskId)));

  let lastId = "0-0";
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const reply = await client.xRead({ key: stream, id: lastId }, { BLOCK: 1000, COUNT: 100 });
    for (const { messages } of reply ?? []) {
      for (const { id, message } of messages) {
        lastId = id;
        if (message.job_id === jobId) {
          return { taskId, entryId: id, envelope: JSON.parse(message.envelope) };
        }
      }
    }
  }
  throw new Error(`no result event for job ${jobId} within ${timeoutMs} ms`);
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
  const client = createClient({ url: process.env.REDIS_URL ?? "redis://127.0.0.1:6379/0" });
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
