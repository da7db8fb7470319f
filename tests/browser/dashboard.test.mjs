// dashboard.test.mjs - ferryd's dashboard in a real browser: Debian's
// chromium, headless, driven by playwright-core (no browser download).
// tests/integration/test_dashboard.c starts Redis, PostgreSQL and ferryd
// and runs this with:
//   FERRY_URL        the dashboard (http://127.0.0.1:PORT/)
//   FERRY_STATS      a file with `ferryctl stats --json` taken while quiet
//   FERRY_DEAD_QUEUE the queue whose dead entries are checked
//   FERRY_REDRIVE_QUEUE (token mode) a queue with 4 dead entries of SQLSTATE
//                    23505 and 2 others: filtered (list and groups), 23505
//                    retried at 1/s in the master, its progress watched
//   FERRY_TOKEN      the token (token mode), or unset (read-only mode)
//   FERRY_SCREENSHOT where to save a screenshot (optional)
//   FERRY_CTL, FERRY_CONFIG  ferryctl and ferryd's config (token mode: a
//                    job enqueued into FERRY_DEAD_QUEUE while it is paused)
//   CHROMIUM         the browser (default /usr/bin/chromium)
// It prints "ok N - what" / "not ok N - what" lines and "# pass N",
// "# fail N" at the end, and exits 1 when a check failed.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const url = process.env.FERRY_URL;
const token = process.env.FERRY_TOKEN || "";
const deadQueue = process.env.FERRY_DEAD_QUEUE;
const stats = JSON.parse(readFileSync(process.env.FERRY_STATS, "utf8"));
let pass = 0, fail = 0, n = 0;

function check(what, ok, detail) {
	n++;
	if (ok) pass++; else fail++;
	console.log((ok ? "ok " : "not ok ") + n + " - " + what +
	    (ok || detail === undefined ? "" : ": " + detail));
}

const browser = await chromium.launch({
	executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	headless: true,
	args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
	const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
	const errors = [];
	page.on("pageerror", (e) => errors.push(e.message));
	await page.goto(url);
	// the script has redrawn the tables from /api at least once
	await page.waitForFunction(() => document.body.dataset.refreshed, null, { timeout: 20000 });

	const host = await page.textContent("#host");
	check("the page names its host", host.length > 0 && (await page.title()).includes(host), host);

	// every queue's numbers are those of ferryctl stats --json
	for (const [name, st] of Object.entries(stats)) {
		const row = `#queues tr[data-queue="${name}"]`;
		const cell = async (k) => (await page.textContent(`${row} td[data-k="${k}"]`)).trim();
		const want = { ready: st.ready, requeued: st.requeued, processing: st.processing,
		    delayed: st.delayed, scheduled: st.scheduled, dead: st.dead,
		    done: st.counters.done, retried: st.counters.retried,
		    deadlettered: st.counters.deadlettered, recovered: st.counters.recovered,
		    enqueued: st.counters.enqueued };
		const got = {};
		for (const k of Object.keys(want)) got[k] = Number(await cell(k));
		check(`queue ${name}: the page's numbers match ferryctl stats --json`,
		    JSON.stringify(got) === JSON.stringify(want),
		    "page " + JSON.stringify(got) + " stats " + JSON.stringify(want));
	}

	// the chart: a polyline per counter, with points (two samples at least)
	await page.waitForFunction(() => {
		const l = document.querySelector('#chart polyline[data-counter="done"]');
		return l && l.getAttribute("points").trim().length > 0;
	}, null, { timeout: 30000 }).catch(() => {});
	const points = await page.$eval('#chart polyline[data-counter="done"]',
	    (l) => l.getAttribute("points").trim().split(/\s+/).filter(Boolean).length).catch(() => 0);
	check("the chart has points", points >= 1, points + " points");
	const peak = await page.$eval('#chart polyline[data-counter="done"]', (l) =>
	    Math.min(...l.getAttribute("points").trim().split(/\s+/).map((p) => Number(p.split(",")[1]))));
	check("the chart shows jobs done (a point above the bottom)", peak < 196, "lowest y " + peak);

	const workers = await page.$$eval("#workers tbody tr", (r) => r.length);
	check("the workers are listed", workers > 0, workers);

	// the dead-letter list of deadQueue, and one entry's document; with a
	// token configured, hidden until it is entered (the counts above are not)
	await page.click(`#queues tr[data-queue="${deadQueue}"] button:has-text("dead letters")`);
	if (token) {
		const why = await page.waitForFunction(() => {
			const p = document.querySelector("#dead-hidden");
			return p && !p.hidden && p.textContent;
		}, null, { timeout: 10000 }).then((h) => h.jsonValue(), () => "");
		const rows = await page.$$eval("#dead tbody tr", (r) => r.length);
		check("without the token: the dead-letter list is hidden, and the page says why",
		    why === "dead entries are hidden: enter the token of [ferryd] http_token" && rows === 0,
		    `"${why}", ${rows} rows`);
		await page.fill("#token", token);
		await page.dispatchEvent("#token", "change");
	} else {
		const hidden = await page.$("#dead-hidden");
		check("no token configured: nothing hidden", hidden === null);
	}
	await page.waitForFunction(() => document.querySelectorAll("#dead tbody tr").length > 0,
	    null, { timeout: 10000 }).catch(() => {});
	const deadRows = await page.$$eval("#dead tbody tr", (r) => r.length);
	check(`the dead-letter list of ${deadQueue} has its ${stats[deadQueue].dead} entries`,
	    deadRows === stats[deadQueue].dead, deadRows);
	const firstId = await page.textContent('#dead tbody tr:first-child td[data-k="id"]');
	await page.click('#dead tbody tr:first-child button:has-text("show")');
	await page.waitForSelector("#doc:not([hidden])", { timeout: 10000 }).catch(() => {});
	const doc = (await page.textContent("#doc")).trim();
	const job = await page.evaluate(async ([q, t]) => (await (await fetch(`/api/dead/one?queue=${q}&index=0`,
	    { headers: t ? { Authorization: "Bearer " + t } : {} })).json()).job, [deadQueue, token]);
	let want = job;
	try { want = JSON.stringify(JSON.parse(job), null, 2); } catch (e) { /* as it is */ }
	check("a dead job's document opens", job !== undefined && doc === want.trim(),
	    `page "${doc}" entry "${job}"`);

	// a POST that carries no token, or a wrong one, is refused
	const forged = await page.evaluate(async ([q, id]) => {
		const u = `/api/dead/replay?queue=${q}&index=0&id=${encodeURIComponent(id)}`;
		const a = await fetch(u, { method: "POST" });
		const b = await fetch(u, { method: "POST", headers: { Authorization: "Bearer not-the-token-at-all" } });
		const c = await fetch("/api/pause?queue=" + q, { method: "POST" });
		return [a.status, b.status, c.status];
	}, [deadQueue, firstId.trim()]);
	check("forged POSTs are refused with 403", forged.every((s) => s === 403), forged.join(","));
	const getActs = await page.evaluate(async (q) => (await fetch("/api/pause?queue=" + q)).status, deadQueue);
	check("GET does not act (no pause by GET)", getActs === 404, getActs);

	if (process.env.FERRY_SCREENSHOT)
		await page.screenshot({ path: process.env.FERRY_SCREENSHOT, fullPage: true });
	const buttons = await page.$$eval("button", (b) => b.map((x) => x.textContent)
	    .filter((t) => ["replay", "purge", "pause", "resume"].includes(t)).length);
	if (!token) {
		check("read-only: no action buttons", buttons === 0, buttons);
		const said = await page.textContent("#readonly").catch(() => "");
		check("read-only: the page says so", said.includes("read-only"), said);
	} else {
		check("with a token: action buttons", buttons > 0, buttons);
		const bulk = await page.$$eval("#dead-reasons button", (b) => b.map((x) => x.textContent).join(","));
		check("with a token: replay all and purge all of a reason", bulk === "replay all,purge all", bulk);
		const hiddenNow = await page.$eval("#dead-hidden", (p) => p.hidden);
		check("with the token entered: the list is shown, nothing said hidden", hiddenNow, hiddenNow);
		await page.click('#dead tbody tr:first-child button:has-text("replay")');
		await page.waitForFunction((want) => document.querySelectorAll("#dead tbody tr").length === want,
		    deadRows - 1, { timeout: 10000 }).catch(() => {});
		const after = await page.$$eval("#dead tbody tr", (r) => r.length);
		check("replay moves the job back: the list shrinks by one", after === deadRows - 1,
		    `${deadRows} -> ${after}`);
		const ids = await page.$$eval('#dead tbody td[data-k="id"]', (c) => c.map((x) => x.textContent));
		check("the replayed job is gone from the list", !ids.includes(firstId), ids.join(","));

		// a selection: reason 23505 grouped, then "retry all matching"
		const rq = process.env.FERRY_REDRIVE_QUEUE;
		await page.click(`#queues tr[data-queue="${rq}"] button:has-text("dead letters")`);
		await page.fill("#dead-f-reason", "23505");
		await page.fill("#dead-f-after", "1h");
		await page.fill("#dead-f-rate", "100");
		await page.click("#dead-groups-load");
		await page.waitForFunction(() => document.querySelector("#dead-groups").dataset.total === "4",
		    null, { timeout: 10000 }).catch(() => {});
		const groups = await page.$$eval("#dead-groups tbody tr", (r) => r.map((x) =>
		    x.dataset.group + ":" + x.querySelector('td[data-k="count"]').textContent));
		check("the filter groups the matching entries by reason", groups.join(",") === "23505:4",
		    groups.join(","));
		// the list follows the selection: exactly the 4 entries selected
		await page.waitForFunction(() => document.querySelector("#dead").dataset.listed === "4",
		    null, { timeout: 10000 }).catch(() => {});
		const listed = await page.$$eval('#dead tbody td[data-k="last_error"]', (c) => c.map((x) => x.textContent));
		const count = await page.textContent("#dead-count");
		check("the list shows only the entries the selection matches, and their count",
		    listed.length === 4 && listed.every((t) => t.startsWith("23505")) && count === "4 matching",
		    listed.join(",") + " / " + count);
		// retried at 1/s: it runs in ferryd, its progress on the page
		await page.fill("#dead-f-rate", "1");
		await page.click("#dead-retry-matching");
		await page.waitForFunction(() => / selected$/.test(document.querySelector("#said").textContent),
		    null, { timeout: 20000 }).catch(() => {});
		const said = await page.textContent("#said");
		check("retry all matching at a rate starts a redrive of the 4 selected",
		    /^redrive [0-9]+ started: 4 selected$/.test(said), said);
		const moving = await page.waitForFunction(() => {
			const r = document.querySelector('#dead-redrives tr[data-state="running"]');
			const m = r && Number(r.querySelector('td[data-k="moved"]').textContent);
			return r && !document.querySelector("#dead-redrives").hidden && m >= 1 && m < 4 &&
			    r.querySelector("progress") && r.querySelector('button') ? m : false;
		}, null, { timeout: 20000, polling: 100 }).then((h) => h.jsonValue(), () => 0);
		check("while it runs, the page shows its progress and a cancel button", moving >= 1, moving);
		await page.waitForFunction(() => document.querySelector('#dead-redrives tr[data-state="done"]'),
		    null, { timeout: 20000 }).catch(() => {});
		const moved = await page.textContent('#dead-redrives tr[data-state="done"] td[data-k="moved"]')
		    .catch(() => "");
		check("the redrive ends having moved the 4", moved === "4", moved);
		await page.fill("#dead-f-reason", "");
		await page.fill("#dead-f-after", "");
		await page.click("#dead-groups-load");
		await page.waitForFunction(() => document.querySelector("#dead-groups").dataset.total === "2",
		    null, { timeout: 10000 }).catch(() => {});
		const rest = await page.$$eval("#dead-groups tbody tr", (r) => r.map((x) =>
		    x.dataset.group + ":" + x.querySelector('td[data-k="count"]').textContent));
		check("the other reason's entries stay dead", rest.join(",") === "failed by the handler:2",
		    rest.join(","));

		// paused with a job waiting, the oldest waiting age shows; once
		// resumed and drained, none (the script's refresh, not a reload)
		const row = `#queues tr[data-queue="${deadQueue}"]`;
		const age = `${row} td[data-k="oldest_ready_age"]`;
		await page.click(`${row} button:has-text("pause")`);
		const paused = await page.waitForFunction(async (q) => {
			const w = (await (await fetch("/api/workers")).json()).workers;
			return w.some((x) => x.queue === q) &&
			    w.filter((x) => x.queue === q).every((x) => x.state === "paused");
		}, deadQueue, { timeout: 20000, polling: 200 }).then(() => true, () => false);
		execFileSync(process.env.FERRY_CTL, ["-c", process.env.FERRY_CONFIG, "enqueue",
		    deadQueue, '{"id":"good-browser"}']);
		await page.waitForFunction((sel) => /^[0-9.]+ (ms|s|min)$/.test(
		    document.querySelector(sel).textContent), age, { timeout: 20000 }).catch(() => {});
		const waiting = (await page.textContent(age)).trim();
		check("paused with a job waiting: the page shows its age", paused &&
		    /^[0-9.]+ (ms|s|min)$/.test(waiting), `paused ${paused}, "${waiting}"`);
		await page.click(`${row} button:has-text("resume")`);
		await page.waitForFunction(([sel, r]) => document.querySelector(sel).textContent === "-" &&
		    document.querySelector(r + ' td[data-k="ready"]').textContent === "0",
		    [age, row], { timeout: 20000 }).catch(() => {});
		const drained = (await page.textContent(age)).trim();
		check("resumed and drained: no oldest waiting age", drained === "-", `"${drained}"`);
	}
	check("no script error on the page", errors.length === 0, errors.join("; "));
} finally {
	await browser.close();
}
console.log(`# pass ${pass}\n# fail ${fail}`);
process.exit(fail === 0 ? 0 : 1);
