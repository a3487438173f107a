// Candlepin's own auto-attach, run under Node as an oracle for bench/attach_differential.py.
//
// Usage: node bench/attach_oracle.js RULES_JS < requests.jsonl > answers.jsonl
//        node bench/attach_oracle.js RULES_JS --serve   (timing: see serveLine below)
//
// RULES_JS is Candlepin's server rules file (rules.js), taken from a Candlepin checkout by
// the Python driver; nothing of Candlepin's is in this repository. The file is run once,
// as Candlepin's JsRunner runs it: a sloppy-mode script whose globals are `log` and
// `json_context` (the JSON arguments of the call).
//
// Each request line is one job in Candlepin's JSON shapes (camelCase, attribute lists):
//   {"consumer": …, "hostConsumer": … | null, "entitlements": [ent, …],
//    "pools": [pool, …], "products": [id, …] | null, "date": ISO string,
//    "considerDerived": false}
// and gets one answer line:
//   {"pools": {poolId: quantity}, "candidates": [poolId, …], "compliance": {…}}
//
// The server side of CandlepinPoolManager.getBestPools is reproduced here in a few lines
// (this file's own code): the compliance status from the consumer's entitlements
// (rules.js Compliance.get_status), the products to cover, the pools active on the date,
// those that provide a product to cover / match the consumer's role or addons / belong
// to a partial stack, the pre-entitlement check (rules.js validate_pools_batch, caller
// best_pools, quantity 1: a pool with an error or a warning is left out) and the quantity
// check (entitlementsAvailable(1)); then rules.js select_pools.
"use strict";

const fs = require("fs");
const vm = require("vm");
const readline = require("readline");

const rulesPath = process.argv[2];
const SERVE = process.argv[3] === "--serve";
if (!rulesPath) {
    process.stderr.write("usage: node attach_oracle.js RULES_JS [--serve]\n");
    process.exit(2);
}

const TIMEOUT_MS = 5000;
const quiet = () => {};
const sandbox = { log: { debug: quiet, info: quiet, warn: quiet, error: quiet }, json_context: "{}" };
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(rulesPath, "utf8"), sandbox, { filename: "rules.js" });

function call(expression, context) {
    sandbox.json_context = JSON.stringify(context);
    // Some inputs make the rules loop forever (see answer()): give up on those.
    return vm.runInContext(expression, sandbox, { timeout: TIMEOUT_MS });
}

// ORACLE_REPEAT=N: also time select_pools N times, warm, and report the median (ms);
// the JSON parse of the context is inside the timing, as in Candlepin's JsRunner.
const REPEAT = parseInt(process.env.ORACLE_REPEAT || "0", 10);
// ORACLE_WARMUP=N: untimed calls before those (5; 0 for a loop over many consumers,
// where the rules are already warm from the consumers before).
const WARMUP = parseInt(process.env.ORACLE_WARMUP || "5", 10);

function timeSelectPools(context) {
    const text = JSON.stringify(context);
    const times = [];
    const cpuTimes = [];
    for (let i = 0; i < REPEAT + WARMUP; i++) {
        sandbox.json_context = text;
        const started = process.hrtime.bigint();
        const cpuStarted = process.cpuUsage();
        vm.runInContext("autobind_name_space().select_pools()", sandbox, { timeout: TIMEOUT_MS });
        const used = process.cpuUsage(cpuStarted);
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        if (i >= WARMUP) {
            times.push(ms);
            cpuTimes.push((used.user + used.system) / 1e3);
        }
    }
    const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
    return { wall: median(times), cpu: median(cpuTimes) };
}

// The select_pools context of the last answer (for --serve's timed rounds).
let lastContext = null;

function complianceOf(request) {
    const text = call("compliance_name_space().get_status()", {
        consumer: request.consumer,
        entitlements: request.entitlements,
        ondate: request.date,
        calculateCompliantUntil: false,
        calculateProductComplianceDateRanges: false,
    });
    const status = JSON.parse(text);
    // The autobind context carries the entitlements' pools as the server sends them.
    const byId = new Map(request.entitlements.map((e) => [e.id, e]));
    for (const name of ["compliantProducts", "partiallyCompliantProducts", "partialStacks"]) {
        for (const key of Object.keys(status[name])) {
            status[name][key] = status[name][key].map((e) => byId.get(e.id));
        }
    }
    return status;
}

function productAttribute(pool, name) {
    const found = pool.productAttributes.find((a) => a.name === name);
    return found ? found.value : null;
}

function splitList(text) {
    return text.split(",").map((s) => s.trim()).filter((s) => s.length > 0);
}

function offersSomething(pool, products, consumer, partialStacks) {
    const stack = productAttribute(pool, "stacking_id");
    if (stack !== null && Object.prototype.hasOwnProperty.call(partialStacks, stack)) {
        return true;
    }
    const provided = new Set([pool.productId, ...pool.providedProducts.map((p) => p.productId)]);
    if (products.some((p) => provided.has(p))) {
        return true;
    }
    const addons = productAttribute(pool, "addons");
    if (addons !== null && (consumer.addOns || []).length > 0) {
        for (const a of splitList(addons)) {
            for (const c of consumer.addOns) {
                if (c !== null && a.toLowerCase() === c.trim().toLowerCase()) {
                    return true;
                }
            }
        }
    }
    const roles = productAttribute(pool, "roles");
    if (roles !== null && consumer.role) {
        for (const r of splitList(roles)) {
            if (r.toLowerCase() === consumer.role.toLowerCase()) {
                return true;
            }
        }
    }
    return false;
}

function activeOn(pool, date) {
    const at = new Date(date).getTime();
    const start = pool.startDate ? new Date(pool.startDate).getTime() : -Infinity;
    const end = pool.endDate ? new Date(pool.endDate).getTime() : Infinity;
    return start <= at && at <= end;
}

function candidatesOf(request, compliance, products) {
    const offered = request.pools.filter(
        (p) => activeOn(p, request.date) &&
            offersSomething(p, products, request.consumer, compliance.partialStacks));
    if (offered.length === 0) {
        return [];
    }
    const results = JSON.parse(call("entitlement_name_space().validate_pools_batch()", {
        consumer: request.consumer,
        hostConsumer: request.hostConsumer,
        consumerEntitlements: request.entitlements,
        standalone: true,
        poolQuantities: offered.map((pool) => ({ pool: pool, quantity: 1 })),
        caller: "best_pools",
    }));
    return offered.filter((pool) => {
        const result = results[pool.id];
        const refused = result && (result.errors.length > 0 || result.warnings.length > 0);
        const available = pool.quantity === -1 || pool.consumed + 1 <= pool.quantity;
        return !refused && available;
    });
}

function answer(request) {
    const compliance = complianceOf(request);
    let products = request.products;
    if (!products || products.length === 0) {
        products = [...compliance.nonCompliantProducts,
            ...Object.keys(compliance.partiallyCompliantProducts)];
    }
    const candidates = candidatesOf(request, compliance, products);
    // AutobindRules.selectBestPools adds the products to cover to the installed list.
    const consumer = JSON.parse(JSON.stringify(request.consumer));
    const installed = consumer.installedProducts.map((p) => p.productId);
    for (const p of products) {
        if (!installed.includes(p)) {
            consumer.installedProducts.push({ productId: p });
        }
    }
    let chosen = {};
    let timing;
    lastContext = null;
    if (candidates.length > 0) {
        const context = {
            consumer: consumer,
            owner: { defaultServiceLevel: null },
            serviceLevelOverride: null,
            pools: candidates,
            products: products,
            compliance: compliance,
            exemptList: [],
            considerDerived: !!request.considerDerived,
            guestIds: consumer.guestIds || [],
        };
        lastContext = context;
        chosen = JSON.parse(call("autobind_name_space().select_pools()", context));
        if (REPEAT > 0) {
            timing = timeSelectPools(context);
        }
    }
    return {
        pools: chosen,
        select_pools_ms: timing && timing.wall,
        select_pools_cpu_ms: timing && timing.cpu,
        candidates: candidates.map((p) => p.id),
        compliance: {
            compliant: Object.keys(compliance.compliantProducts),
            partial: Object.keys(compliance.partiallyCompliantProducts),
            partialStacks: Object.keys(compliance.partialStacks),
            nonCompliant: compliance.nonCompliantProducts,
        },
    };
}

// Whole answer for one request line, with the retry for rules.js's endless loop on addons.
function answerLine(request) {
    let out;
    try {
        out = answer(request);
    } catch (err) {
        out = { error: String(err && err.stack ? err.stack : err) };
    }
    // get_best_entitlement_groups removes a covered addon from the list it loops over by
    // exact string, comparing the consumer's addon with the pool's lower-cased one. When
    // the consumer has attached entitlements, that list keeps the consumer's spelling, so
    // an addon that is not lower case is never removed and the loop never ends. Every
    // other comparison of addons is case-insensitive: the answer Candlepin means is the
    // one for the same addons in lower case.
    if (out.error && /timed out/.test(out.error) && (request.consumer.addOns || []).length) {
        request.consumer.addOns = request.consumer.addOns.map((a) => a.toLowerCase());
        try {
            out = answer(request);
            out.note = "addons lower-cased: rules.js loops on them as given";
        } catch (err) {
            out = { error: String(err && err.stack ? err.stack : err) };
        }
    }
    return out;
}

// --serve: the first line is one request, answered as above; each later line
// {"calls": K} is answered with the wall and CPU seconds of K warm select_pools calls on
// that answer's context (its JSON parse inside the timing, as in Candlepin's JsRunner).
const WARM_UP = 5;
let served = null;

function timedRound(calls) {
    const wall = [];
    const cpu = [];
    for (let i = 0; i < calls; i++) {
        sandbox.json_context = served;
        const started = process.hrtime.bigint();
        const cpuStarted = process.cpuUsage();
        vm.runInContext("autobind_name_space().select_pools()", sandbox, { timeout: TIMEOUT_MS });
        const used = process.cpuUsage(cpuStarted);
        wall.push(Number(process.hrtime.bigint() - started) / 1e9);
        cpu.push((used.user + used.system) / 1e6);
    }
    return { wall_s: wall, cpu_s: cpu };
}

function serveLine(line) {
    if (served === null) {
        const out = answerLine(JSON.parse(line));
        if (lastContext === null) {
            out.error = out.error || "no pool to select from: nothing to time";
        } else {
            served = JSON.stringify(lastContext);
            timedRound(WARM_UP);
        }
        return out;
    }
    return timedRound(JSON.parse(line).calls);
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
    if (!line.trim()) {
        return;
    }
    const out = SERVE ? serveLine(line) : answerLine(JSON.parse(line));
    process.stdout.write(JSON.stringify(out) + "\n");
});
