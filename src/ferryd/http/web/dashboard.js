// dashboard.js - ferryd's dashboard (src/ferryd/http/http_dashboard.c embeds it): every
// few seconds it reads /api/queues, /api/workers, /api/series and
// /api/events and redraws the tables the server wrote and the chart (inline
// SVG: a few polylines need no library, and nothing is fetched from the
// network). The dead-letter list is read page by page from /api/dead (only
// the entries the selection below matches, a page going on where the last
// one ended); with
// a token configured (data-actions="1") replay, purge, pause and resume are
// POSTs that carry it as "Authorization: Bearer TOKEN". A selection (reason
// or SQLSTATE, id pattern, times) groups the dead entries by reason
// (/api/dead/summary) and retries (at a rate) or purges all it matches
// (/api/dead/retry-matching, /purge-matching), as `ferryctl dead` does; a
// paced retry runs in the master, its progress shown from
// /api/dead/redrives with a button that cancels it. With a token
// configured, every read of dead entries needs it too: until it is
// entered the page shows the queues' dead counts (open to all) and says
// why the list is hidden.
"use strict";
(function () {
	const REFRESH_MS = 3000, PAGE = 20;
	const actions = document.body.dataset.actions === "1";
	const $ = (id) => document.getElementById(id);
	const counters = ["done", "retried", "dead", "recovered"];
	// the list's page starts at deadOffset; deadBack: the starts of the
	// pages before it (a filtered page ends where its `next` says)
	let deadQueue = null, deadOffset = 0, deadNext = null, deadBack = [];
	// the list and the groups answer in any order: only the newest request
	// of each may draw (a late answer to an older selection is dropped)
	let deadAsked = 0, groupsAsked = 0;

	function el(tag, attrs, ...kids) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (k === "class") e.className = v;
			else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
			else e.setAttribute(k, v);
		}
		for (const k of kids)
			e.append(k instanceof Node ? k : k === null || k === undefined ? "" : String(k));
		return e;
	}
	function td(k, v, cls) {
		const c = el("td", { "data-k": k }, v === null || v === undefined ? "-" : v);
		if (cls) c.className = cls;
		return c;
	}
	function ms(v) {
		if (v === null || v === undefined) return "-";
		return v < 1000 ? v + " ms" : v < 120000 ? (v / 1000).toFixed(1) + " s" :
		    Math.round(v / 60000) + " min";
	}
	function bytes(v) {
		if (v === null || v === undefined) return "-";
		const u = ["B", "KiB", "MiB", "GiB", "TiB"];
		let i = 0;
		while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
		return i ? v.toFixed(1) + " " + u[i] : v + " B";
	}
	// with the token once entered: the workers' last errors need it
	async function getJSON(url) {
		const r = await fetch(url, { cache: "no-store", headers: authed() });
		if (!r.ok) throw new Error(url + ": " + r.status);
		return r.json();
	}
	// the master reads the dead-letter list one request at a time (503,
	// Retry-After: 1, while another is under way): asked again, 3 times
	async function getDeadJSON(url) {
		for (let tries = 1; ; tries++) {
			const r = await fetch(url, { cache: "no-store", headers: authed() });
			if (r.status === 503 && tries < 4) {
				await new Promise((done) => setTimeout(done, 1000));
				continue;
			}
			if (!r.ok) throw new Error(url + ": " + r.status);
			return r.json();
		}
	}
	function token() { return $("token") ? $("token").value : ""; }
	function authed() { return token() ? { Authorization: "Bearer " + token() } : {}; }
	// with a token configured, dead entries are read with it only: why
	// they are not shown (null: they are)
	const HIDDEN = "dead entries are hidden: enter the token of [ferryd] http_token";
	function hideDead(why) {
		const p = $("dead-hidden");
		if (!p) return;
		p.textContent = why || "";
		p.hidden = !why;
		if (why) {
			$("dead").tBodies[0].replaceChildren();
			$("dead-groups").tBodies[0].replaceChildren();
			$("dead-reasons").replaceChildren();
		}
	}
	function deadHidden() {
		if (!actions || token()) return false;
		hideDead(HIDDEN);
		return true;
	}
	async function post(url) {
		const r = await fetch(url, { method: "POST", headers: authed() });
		const body = await r.json().catch(() => ({}));
		say(r.status === 202 ? "redrive " + body.id + " started: " + body.selected + " selected" :
		    r.ok ? (body.message || (body.replayed !== undefined ? "replayed " + body.replayed +
		    (body.selected !== undefined ? " of " + body.selected + " selected" : "") :
		    body.purged !== undefined ? "purged " + body.purged : "done")) : "refused (" + r.status + "): " +
		    (body.error || ""));
		refresh();
		if (deadQueue) { loadDead(); loadGroups(); }
		loadRedrives();
		return r.ok ? body : null;
	}
	function say(text) { $("said").textContent = text; }
	function button(label, fn, cls) {
		return el("button", { class: cls || "", onclick: fn }, label);
	}

	function drawQueues(d) {
		$("host").textContent = d.host;
		const tb = $("queues").tBodies[0];
		tb.replaceChildren();
		for (const q of d.queues) {
			const c = q.counters || {}, m = q.memory || {};
			const tr = el("tr", { "data-queue": q.name, class: q.paused ? "paused" : "" });
			tr.append(td("name", q.name, "t"), td("state", q.paused ? "paused" : "running", "t"),
			    td("workers", q.workers + "/" + q.target), td("ready", q.ready),
			    td("requeued", q.requeued), td("processing", q.processing),
			    td("delayed", q.delayed), td("scheduled", q.scheduled), td("dead", q.dead),
			    td("enqueued", c.enqueued), td("done", c.done), td("retried", c.retried),
			    td("deadlettered", c.deadlettered), td("recovered", c.recovered),
			    td("oldest_ready_age", q.oldest_ready_age_ms ? ms(q.oldest_ready_age_ms) : "-"),
			    td("held", bytes(m.bytes), m.refusing ? "bad" : ""),
			    td("protected_keys", m.protected_keys),
			    td("protected_lost", m.protected_lost, m.protected_lost > 0 ? "bad" : ""));
			const act = el("td", { class: "t" });
			act.append(button("dead letters", () => { deadQueue = q.name; reloadDead(); }));
			if (actions)
				act.append(q.paused ? button("resume", () => post("/api/resume?queue=" + encodeURIComponent(q.name)))
				    : button("pause", () => post("/api/pause?queue=" + encodeURIComponent(q.name))));
			tr.append(act);
			tb.append(tr);
		}
		$("updated").textContent = "updated " + new Date().toLocaleTimeString() +
		    (d.redis_up ? "" : " · redis unreachable");
	}

	function drawWorkers(d) {
		const tb = $("workers").tBodies[0];
		tb.replaceChildren();
		for (const w of d.workers)
			tb.append(el("tr", { "data-pid": w.pid }, ...[
			    td("queue", w.queue, "t"), td("number", w.number), td("host", w.host, "t"),
			    td("pid", w.pid), td("state", w.state, "t"), td("batch_size", w.batch_size),
			    td("batch_age", ms(w.batch_age_ms)), td("jobs_done", w.jobs_done),
			    td("restarts", w.restarts), td("last_error", w.last_error, "err")]));
	}

	function drawEvents(d) {
		const tb = $("events").tBodies[0];
		tb.replaceChildren();
		for (const e of d.events.slice(0, 50))
			tb.append(el("tr", {}, td("time", new Date(e.time_ms).toLocaleTimeString(), "t"),
			    td("kind", e.kind, "t"), td("text", e.text, "t")));
	}

	// the rates of every queue summed, one polyline per counter
	function drawChart(d) {
		const svg = $("chart"), W = 600, H = 200, pad = 4;
		const lists = Object.values(d.queues);
		const n = Math.max(0, ...lists.map((l) => l.length));
		const sums = [];
		for (let i = 0; i < n; i++) {
			const s = { time_ms: 0 };
			for (const c of counters) s[c] = 0;
			for (const l of lists) {
				const p = l[l.length - n + i];
				if (!p) continue;
				s.time_ms = p.time_ms;
				for (const c of counters) s[c] += p[c];
			}
			sums.push(s);
		}
		const max = Math.max(1, ...sums.flatMap((s) => counters.map((c) => s[c])));
		svg.replaceChildren();
		const ns = "http://www.w3.org/2000/svg";
		const slots = 15 * 60 / d.step_s;
		for (const c of counters) {
			const pts = sums.map((s, i) => {
				const x = W - pad - (n - 1 - i) * (W - 2 * pad) / slots;
				const y = H - pad - s[c] * (H - 2 * pad) / max;
				return x.toFixed(1) + "," + y.toFixed(1);
			});
			const line = document.createElementNS(ns, "polyline");
			line.setAttribute("class", "c-" + c);
			line.setAttribute("data-counter", c);
			line.setAttribute("points", pts.join(" "));
			svg.append(line);
			for (const p of pts.slice(-60)) {   // dots: a lone sample shows too
				const dot = document.createElementNS(ns, "circle");
				const [x, y] = p.split(",");
				dot.setAttribute("class", "c-" + c);
				dot.setAttribute("cx", x);
				dot.setAttribute("cy", y);
				dot.setAttribute("r", "2.5");
				svg.append(dot);
			}
		}
		for (const [x, anchor, label] of [[pad, "start", "15 min ago"], [W - pad, "end", "now"]]) {
			const t = document.createElementNS(ns, "text");
			t.setAttribute("x", x);
			t.setAttribute("y", 14);
			t.setAttribute("text-anchor", anchor);
			t.textContent = label;
			svg.append(t);
		}
		$("chart-max").textContent = "top: " + max.toFixed(1) + " jobs/s; " + n + " samples";
	}

	// the list's first page, and the groups, for the queue and selection now
	function reloadDead() {
		deadOffset = 0;
		deadBack = [];
		loadDead();
		loadGroups();
	}
	async function loadDead() {
		const asked = ++deadAsked;
		$("dead-queue").textContent = deadQueue;
		if (deadHidden()) return;
		const r = await fetch("/api/dead?" + selection({ offset: deadOffset, limit: PAGE }),
		    { cache: "no-store", headers: authed() }).catch((e) => null);
		const d = r ? await r.json().catch(() => ({})) : {};
		if (asked !== deadAsked) return;
		if (r && r.status === 403) { hideDead("dead entries are hidden: " + (d.error || "403")); return; }
		if (!r || !r.ok) { say("dead letters: " + (r ? r.status + " " + (d.error || "") : "no answer")); return; }
		hideDead(null);
		const tb = $("dead").tBodies[0];
		tb.replaceChildren();
		for (const e of d.entries) {
			const q = "queue=" + encodeURIComponent(deadQueue) + "&index=" + e.index +
			    "&id=" + encodeURIComponent(e.id) + "&sha1=" + e.sha1;
			const act = el("td", { class: "t" }, button("show", () => showDoc(q)));
			if (actions)
				act.append(button("replay", () => post("/api/dead/replay?" + q)),
				    button("purge", () => post("/api/dead/purge?" + q), "danger"));
			tb.append(el("tr", { "data-id": e.id }, td("index", e.index), td("id", e.id, "t"),
			    td("time", e.time ? new Date(e.time).toLocaleString() : "-", "t"),
			    td("reason", e.reason, "t"), td("attempts", e.attempts),
			    td("first_error", e.first_error, "err"), td("last_error", e.last_error, "err"), act));
		}
		// every entry of a reason at once (the reasons of this page)
		const reasons = $("dead-reasons");
		reasons.replaceChildren();
		if (actions)
			for (const reason of [...new Set(d.entries.map((e) => e.reason))]) {
				const q = "queue=" + encodeURIComponent(deadQueue) + "&reason=" +
				    encodeURIComponent(reason);
				reasons.append(el("span", { "data-reason": reason }, reason + ": ",
				    button("replay all", () => post("/api/dead/replay-reason?" + q)),
				    button("purge all", () => post("/api/dead/purge-reason?" + q), "danger")), " ");
			}
		$("dead-prev").disabled = deadBack.length === 0;
		$("dead-next").disabled = !d.more;
		deadNext = d.next;
		$("dead").dataset.listed = String(d.entries.length);
		// fewer than PAGE: big entries, or a selection that matched few of
		// the entries one request reads
		if (d.more && d.entries.length < PAGE)
			say((d.filtered ? d.scanned + " entries read, " : "big entries: ") +
			    d.entries.length + " shown; more after them (older)");
	}

	// the selection of the filter fields, as the API takes it
	function selection(extra) {
		const p = new URLSearchParams({ queue: deadQueue });
		for (const k of ["reason", "id", "after", "before"]) {
			const v = $("dead-f-" + k).value.trim();
			if (v) p.set(k, v);
		}
		for (const [k, v] of Object.entries(extra || {})) p.set(k, v);
		return p.toString();
	}
	async function loadGroups() {
		if (!deadQueue || deadHidden()) return;
		const asked = ++groupsAsked;
		const r = await fetch("/api/dead/summary?" + selection(), { cache: "no-store", headers: authed() });
		const d = await r.json().catch(() => ({}));
		if (asked !== groupsAsked) return;
		const tb = $("dead-groups").tBodies[0];
		tb.replaceChildren();
		if (!r.ok) { say("group by reason: " + r.status + " " + (d.error || "")); return; }
		const when = (t) => t >= 0 ? new Date(t).toLocaleString() : "-";
		for (const g of d.groups) {
			const act = el("td", { class: "t" });
			if (actions)
				act.append(button("retry group", () => retryMatching({ group: g.group })),
				    button("purge group", () => post("/api/dead/purge-matching?" +
				    selection({ group: g.group })), "danger"));
			tb.append(el("tr", { "data-group": g.group }, td("count", g.count),
			    td("group", g.group, "t"), td("oldest", when(g.oldest), "t"),
			    td("newest", when(g.newest), "t"),
			    td("example", g.last_error || g.reason, "err"), act));
		}
		$("dead-groups").dataset.total = String(d.total);
		$("dead-count").textContent = d.total + " matching";
	}
	function retryMatching(extra) {
		const rate = $("dead-f-rate").value.trim();
		return post("/api/dead/retry-matching?" + selection(Object.assign(rate ? { rate } : {}, extra)));
	}

	// the redrives this master runs (retry/purge all matching), polled
	// every half second while one runs
	let redrivesTimer = null;
	function when(t) { return t ? new Date(t).toLocaleTimeString() : "-"; }
	async function loadRedrives() {
		if (!actions || !token()) return;
		const r = await fetch("/api/dead/redrives", { cache: "no-store", headers: authed() })
		    .catch(() => null);
		if (!r || !r.ok) return;
		const d = await r.json();
		const tb = $("dead-redrives").tBodies[0];
		tb.replaceChildren();
		for (const x of d.redrives) {
			const sel = Object.entries(x.selection).map(([k, v]) => k + "=" +
			    (k === "before" || k === "after" ? new Date(v).toISOString() : v)).join(" ");
			const act = el("td", { class: "t" });
			if (x.state === "running")
				act.append(button("cancel", () => post("/api/dead/redrive/cancel?id=" + x.id), "danger"));
			const bar = el("progress", { max: String(x.selected || 1), value: String(x.moved) });
			tb.append(el("tr", { "data-id": x.id, "data-state": x.state }, td("id", x.id),
			    td("queue", x.queue + (x.to && x.to !== x.queue ? " to " + x.to : ""), "t"),
			    td("action", x.action, "t"), td("selection", sel || "all", "t"),
			    td("rate", x.rate ? x.rate + "/s" : "-"),
			    el("td", { "data-k": "progress" }, bar, " ", x.selected === null ? "counting" :
			        x.moved + " of " + x.selected),
			    td("moved", x.moved), td("left", x.left),
			    td("state", x.state + (x.error ? ": " + x.error : ""), "t"),
			    td("started", when(x.started), "t"), td("finished", when(x.finished), "t"), act));
		}
		$("dead-redrives").hidden = d.redrives.length === 0;
		clearTimeout(redrivesTimer);
		redrivesTimer = d.redrives.some((x) => x.state === "running") ?
		    setTimeout(loadRedrives, 500) : null;
	}

	async function showDoc(q) {
		const d = await getDeadJSON("/api/dead/one?" + q).catch((e) => ({ error: e.message }));
		const doc = $("doc");
		let text = d.job !== undefined ? d.job : JSON.stringify(d, null, 2);
		try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON */ }
		doc.textContent = d.truncated ? "(" + d.note + ")\n" + text : text;
		doc.hidden = false;
	}

	async function refresh() {
		try {
			const [q, w, s, e] = await Promise.all(["/api/queues", "/api/workers",
			    "/api/series", "/api/events"].map(getJSON));
			drawQueues(q); drawWorkers(w); drawChart(s); drawEvents(e);
			if (!redrivesTimer) loadRedrives();
			document.body.dataset.refreshed = String(Date.now());
		} catch (err) {
			$("updated").textContent = "refresh failed: " + err.message;
		}
	}

	$("dead-groups-load").addEventListener("click", () => { if (deadQueue) reloadDead(); });
	$("dead-retry-matching").addEventListener("click", () => retryMatching());
	$("dead-purge-matching").addEventListener("click", () => post("/api/dead/purge-matching?" + selection()));
	if (!actions) for (const b of document.querySelectorAll("#dead-filter .act")) b.hidden = true;
	$("dead-prev").addEventListener("click", () => { deadOffset = deadBack.pop() || 0; loadDead(); });
	$("dead-next").addEventListener("click", () => {
		if (deadNext === null) return;
		deadBack.push(deadOffset);
		deadOffset = deadNext;
		loadDead();
	});
	if ($("token")) {
		$("token").value = sessionStorage.getItem("ferry-token") || "";
		// "change" comes again when the field loses focus: act once a value
		let applied = token();
		$("token").addEventListener("change", () => {
			if (token() === applied) return;
			applied = token();
			sessionStorage.setItem("ferry-token", token());
			if (deadQueue) reloadDead();
			else if (!deadHidden()) hideDead(null);
			loadRedrives();
		});
		deadHidden();
	}
	for (const n of document.querySelectorAll(".nojs")) n.hidden = true;
	for (const n of document.querySelectorAll(".js")) n.hidden = false;
	refresh();
	setInterval(refresh, REFRESH_MS);
})();
