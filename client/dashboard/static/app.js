// mqdashboard pages: a hash router over the JSON API in client/dashboard/routes.py.
// No framework and no CDN. Every value from the cluster goes into the page as text
// (h() builds elements; nothing is assigned to innerHTML), so a topic or a message body
// cannot inject markup. State-changing calls carry the session's CSRF token.
"use strict";

const state = { session: null, timers: [], gen: 0 };

// -- small helpers ----------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
                 : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value" && !svg) el.value = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const pad2 = (n) => String(n).padStart(2, "0");
const ymd = (d) => `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;
const hms = (d) => `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;

const fmt = {
  num: (n) => (n === null || n === undefined) ? "-" : Number(n).toLocaleString("en-US"),
  tps: (n) => (n === null || n === undefined) ? "-" : Number(n).toFixed(2),
  pct: (r) => (r === null || r === undefined) ? "-" : (r * 100).toFixed(1) + "%",
  // 24-hour local times, whatever the browser's locale: 2024-05-01 17:03:09
  time: (ms) => (!ms || ms <= 0) ? "-" : `${ymd(new Date(ms))} ${hms(new Date(ms))}`,
  clock: (ms) => (!ms || ms <= 0) ? "-" : hms(new Date(ms)),
  bytes: (n) => {
    if (n === null || n === undefined) return "-";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; let v = n;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : v) + " " + u[i];
  },
};

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET" && state.session && state.session.csrf_token) {
    opts.headers["X-CSRF-Token"] = state.session.csrf_token;
  }
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  try { data = await resp.json(); } catch (e) { data = { error: resp.statusText }; }
  if (resp.status === 401 && state.session && state.session.login_required) {
    location.hash = "#/login";
  }
  if (!resp.ok) throw new Error(data && data.error ? data.error : resp.status + " " + resp.statusText);
  return data;
}

function flash(message, kind) {
  const el = document.getElementById("flash");
  el.textContent = message;
  el.className = kind || "ok";
  el.hidden = false;
  state.keepFlash = true;  // survives the re-render that follows an action
}
function clearFlash() { document.getElementById("flash").hidden = true; }

async function guarded(fn) {
  try { return await fn(); } catch (e) { flash(e.message, "error"); return undefined; }
}

function table(columns, rows, opts) {
  opts = opts || {};
  const head = h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.map((r) => h("tr", {
    class: opts.onClick ? "clickable" : null,
    "data-key": opts.key ? opts.key(r) : null,
    onclick: opts.onClick ? () => opts.onClick(r) : null,
  }, columns.map((c) => h("td", { class: c.num ? "num" : null, "data-col": c.id || null },
                         c.render ? c.render(r) : r[c.key]))));
  if (!rows.length) body.push(h("tr", {}, h("td", { colspan: columns.length, class: "muted" },
                                             opts.empty || "nothing to show")));
  return h("table", { id: opts.id || null }, h("thead", {}, head), h("tbody", {}, body));
}

function confirmByName(title, text, name) {
  const dlg = document.getElementById("confirm-dialog");
  const input = document.getElementById("confirm-input");
  const ok = document.getElementById("confirm-ok");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-name").textContent = name;
  input.value = "";
  ok.disabled = true;
  input.oninput = () => { ok.disabled = input.value !== name; };
  return new Promise((resolve) => {
    document.getElementById("confirm-cancel").onclick = () => dlg.close("cancel");
    dlg.onclose = () => resolve(dlg.returnValue === "ok" && input.value === name ? name : null);
    dlg.returnValue = "";
    dlg.showModal();
    input.focus();
  });
}

// A periodic refresh that belongs to the page being shown: a newer route stops it.
function every(ms, fn, immediate) {
  const gen = state.gen;
  if (immediate !== false) fn();
  const id = setInterval(() => { if (gen === state.gen) fn(); else clearInterval(id); }, ms);
  state.timers.push(id);
}
function stopTimers() { state.timers.forEach(clearInterval); state.timers = []; }

// Times are typed and shown as 24-hour local "YYYY-MM-DD HH:MM:SS" whatever the browser's
// locale (a datetime-local input follows the locale, AM/PM in en-US).
function localInput(ms) { return fmt.time(ms); }

function timeInput(id, ms) {
  return h("input", { id, class: "time", value: localInput(ms), size: 19, spellcheck: "false",
                      placeholder: "YYYY-MM-DD HH:MM:SS", title: "local time, 24-hour: YYYY-MM-DD HH:MM:SS" });
}

// "YYYY-MM-DD HH:MM[:SS]" (or with a T) in local time -> epoch ms; NaN when malformed.
function parseTime(text) {
  const m = /^\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?\s*$/.exec(text);
  if (!m) return NaN;
  const [y, mo, d, hh, mi, ss] = m.slice(1).map((v) => Number(v || 0));
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || hh > 23 || mi > 59 || ss > 59) return NaN;
  return new Date(y, mo - 1, d, hh, mi, ss).getTime();
}

function timeOf(input) {
  const ms = parseTime(input.value);
  if (Number.isNaN(ms)) throw new Error(`'${input.value}' is not a time: use YYYY-MM-DD HH:MM:SS (24-hour)`);
  return ms;
}

function stat(label, value, id) {
  return h("div", { class: "card stat" }, h("div", { class: "k" }, label),
           h("div", { class: "v", id: id || null }, value));
}

// "1-50 of 2,000" with previous / next; go(page) shows another page.
function pager(data, id, go) {
  const from = data.total ? (data.page - 1) * data.size + 1 : 0;
  const to = Math.min(data.page * data.size, data.total);
  return h("div", { class: "pager", id },
    h("button", { class: "prev", disabled: data.page <= 1 ? true : null,
                  onclick: () => go(data.page - 1) }, "\u2039 Previous"),
    h("span", { class: "range" }, `${fmt.num(from)}\u2013${fmt.num(to)} of ${fmt.num(data.total)}`),
    h("button", { class: "next", disabled: data.page >= data.pages ? true : null,
                  onclick: () => go(data.page + 1) }, "Next \u203a"));
}

// -- a tiny SVG line chart ----------------------------------------------------------------

const COLORS = ["#1f6feb", "#e8590c", "#2e7d32", "#8e24aa", "#c62828", "#00838f", "#6d4c41"];

// Axes: the value axis names its unit ("msg/s", "messages"), the time axis is 24-hour local.
function lineChart(title, series, id, format, unit) {
  format = format || fmt.tps;
  const W = 600, H = 230, L = 62, R = 12, T = 10, B = 38;
  const pts = series.flatMap((s) => s.points);
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
                             "aria-label": `${title} (${unit})` });
  const wrap = h("div", { class: "chart", id: id || null }, h("h3", {}, `${title} (${unit})`), svg);
  if (!pts.length) { wrap.append(h("p", { class: "muted" }, "waiting for samples...")); return wrap; }
  const t0 = Math.min(...pts.map((p) => p[0])), t1 = Math.max(...pts.map((p) => p[0]));
  const vmax = Math.max(1, ...pts.map((p) => p[1]));
  const x = (t) => L + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / vmax) * (H - T - B);
  const label = { "font-size": 10, fill: "#6b7785" };
  for (let i = 0; i <= 4; i++) {
    const v = (vmax * i) / 4;
    svg.append(h("svg:line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#e3e8ef" }));
    svg.append(h("svg:text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "tick-y", ...label },
                 v >= 10 ? Math.round(v) : v.toFixed(1)));
  }
  const ticks = t1 === t0 ? [t0] : [0, 1, 2, 3, 4].map((i) => t0 + ((t1 - t0) * i) / 4);
  ticks.forEach((t, i) => {
    const anchor = ticks.length === 1 || i === 0 ? "start" : i === ticks.length - 1 ? "end" : "middle";
    svg.append(h("svg:line", { x1: x(t), x2: x(t), y1: H - B, y2: H - B + 4, stroke: "#9aa5b1" }));
    svg.append(h("svg:text", { x: x(t), y: H - B + 15, "text-anchor": anchor, class: "tick-x", ...label },
                 fmt.clock(t)));
  });
  svg.append(h("svg:line", { x1: L, x2: W - R, y1: H - B, y2: H - B, stroke: "#9aa5b1" }));
  svg.append(h("svg:line", { x1: L, x2: L, y1: T, y2: H - B, stroke: "#9aa5b1" }));
  svg.append(h("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", class: "axis-x", ...label },
               "time (local, 24-hour)"));
  svg.append(h("svg:text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis-y",
                             transform: `rotate(-90 12 ${(T + H - B) / 2})`, ...label }, unit));
  const legend = h("div", { class: "legend" });
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    svg.append(h("svg:polyline", { fill: "none", stroke: color, "stroke-width": 2,
                                   "data-series": s.name,
                                   points: s.points.map((p) => `${x(p[0])},${y(p[1])}`).join(" ") }));
    const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
    legend.append(h("span", { "data-series": s.name }, h("i", { style: null, class: "sw" + i }),
                    `${s.name}: ${format(last)} ${unit}`));
  });
  legend.querySelectorAll("i").forEach((el, i) => { el.style.background = COLORS[i % COLORS.length]; });
  wrap.append(legend);
  return wrap;
}

// -- pages ----------------------------------------------------------------------------------

async function pageCluster(main) {
  const data = await api("GET", "/api/cluster");
  main.replaceChildren(h("h2", {}, "Cluster"),
    h("p", { class: "muted" }, "Name servers: " + data.namesrv_addr));
  for (const c of data.clusters) {
    main.append(h("h3", {}, "Cluster " + c.name), table([
      { title: "Broker", render: (b) => b.broker_name },
      { title: "Role", render: (b) => h("span", { class: "badge " + b.role.toLowerCase() },
                                         `${b.role} (${b.broker_id})`) },
      { title: "Address", id: "addr", render: (b) => h("a", { href: "#/brokers/" + encodeURIComponent(b.addr),
                                                              title: "configuration" }, b.addr) },
      { title: "Version", key: "version" },
      { title: "TPS in", num: true, id: "put_tps", render: (b) => fmt.tps(b.put_tps) },
      { title: "TPS out", num: true, id: "get_tps", render: (b) => fmt.tps(b.get_tps) },
      { title: "Put today", num: true, id: "put_today", render: (b) => fmt.num(b.msg_put_today) },
      { title: "Get today", num: true, render: (b) => fmt.num(b.msg_get_today) },
      { title: "Disk used", num: true, render: (b) => fmt.pct(b.disk_ratio) },
      { title: "Capacity", render: (b) => b.disk_capacity || "-" },
      { title: "Replication lag", num: true, id: "repl_lag",
        render: (b) => b.role === "MASTER" ? "-" : fmt.bytes(b.replication_lag_bytes) },
      { title: "", render: (b) => b.error ? h("span", { class: "lag-bad" }, b.error) : "" },
    ], c.brokers, { id: "brokers-" + c.name, key: (b) => b.broker_name + "/" + b.broker_id }));
  }
}

// Timer messages: pending per topic (GET_TIMER_METRICS of every master) and each master's
// progress as stock 5.x's clusterList shows it.
async function pageTimers(main) {
  const data = await api("GET", "/api/timers");
  main.replaceChildren(h("h2", {}, "Timer messages"),
    h("p", { class: "muted", id: "timers-total" }, `${fmt.num(data.total)} timers pending`),
    h("h3", {}, "Pending per topic"),
    table([
      { title: "Topic", render: (t) => h("a", { href: "#/topics/" + encodeURIComponent(t.topic) }, t.topic) },
      { title: "Pending", num: true, id: "pending", render: (t) => fmt.num(t.pending) },
      { title: "Per broker", render: (t) => Object.entries(t.brokers).map(([b, n]) => `${b}: ${fmt.num(n)}`).join(", ") },
      { title: "Last change", render: (t) => t.last_change_ms ? fmt.time(t.last_change_ms) : "-" },
    ], data.topics, { id: "timer-topics", key: (t) => t.topic, empty: "no timer pending" }),
    h("h3", {}, "Timer store per master"),
    table([
      { title: "Broker", key: "broker_name" },
      { title: "Address", key: "addr" },
      { title: "Pending", num: true, id: "pending", render: (b) => b.pending === undefined ? "-" : fmt.num(b.pending) },
      { title: "Read behind (s)", num: true, render: (b) => b.read_behind_s === undefined ? "-" : fmt.num(b.read_behind_s) },
      { title: "Not yet in wheel", num: true, render: (b) => b.offset_behind === undefined ? "-" : fmt.num(b.offset_behind) },
      { title: "Enqueue /s", num: true, render: (b) => b.enqueue_tps === undefined ? "-" : fmt.tps(b.enqueue_tps) },
      { title: "Deliver /s", num: true, render: (b) => b.dequeue_tps === undefined ? "-" : fmt.tps(b.dequeue_tps) },
      { title: "", render: (b) => b.error ? h("span", { class: "lag-bad" }, b.error) : "" },
    ], data.brokers, { id: "timer-brokers", key: (b) => b.broker_name }));
}

async function pageTopics(main, query) {
  const q = query.get("q") || "";
  const kinds = query.get("kinds") || "normal";
  const pageNo = Number(query.get("page")) || 1;
  const data = await api("GET", `/api/topics?q=${encodeURIComponent(q)}&kinds=${kinds}&page=${pageNo}`);
  const search = h("input", { id: "topic-search", placeholder: "search topics", value: q });
  const sys = h("input", { type: "checkbox", id: "topic-all-kinds",
                           checked: kinds !== "normal" ? true : null });
  const go = () => {
    const k = sys.checked ? "normal,retry,dlq,system" : "normal";
    location.hash = `#/topics?q=${encodeURIComponent(search.value)}&kinds=${k}`;
  };
  search.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
  const name = h("input", { id: "new-topic-name", placeholder: "TopicName", required: true });
  const cluster = h("select", { id: "new-topic-cluster" },
                    data.clusters.map((c) => h("option", { value: c }, c)));
  const rq = h("input", { id: "new-topic-read", type: "number", value: 4, min: 1, max: 1024 });
  const wq = h("input", { id: "new-topic-write", type: "number", value: 4, min: 1, max: 1024 });
  const perm = h("select", { id: "new-topic-perm" }, h("option", { value: 6 }, "RW (6)"),
                 h("option", { value: 4 }, "R (4)"), h("option", { value: 2 }, "W (2)"));
  const create = h("form", { class: "inline card", id: "create-topic-form", onsubmit: async (e) => {
    e.preventDefault();
    const r = await guarded(() => api("POST", "/api/topics", {
      topic: name.value.trim(), cluster: cluster.value, read_queue_nums: Number(rq.value),
      write_queue_nums: Number(wq.value), perm: Number(perm.value) }));
    if (r) { flash(`Topic ${r.topic} created on ${r.brokers.join(", ")}`); route(); }
  } }, h("label", {}, "New topic", name), h("label", {}, "Cluster", cluster),
     h("label", {}, "Read queues", rq), h("label", {}, "Write queues", wq),
     h("label", {}, "Perm", perm), h("button", { class: "primary", id: "create-topic" }, "Create"));
  main.replaceChildren(h("h2", {}, "Topics"),
    h("div", { class: "toolbar" }, h("label", {}, "Search", search),
      h("label", {}, h("span", {}, "Retry, DLQ and system too"), sys),
      h("button", { onclick: go, id: "topic-search-go" }, "Search")),
    create,
    pager(data, "topic-pager", (n) => {
      location.hash = `#/topics?q=${encodeURIComponent(q)}&kinds=${kinds}&page=${n}`;
    }),
    table([{ title: "Topic", key: "topic", id: "topic" }, { title: "Kind", key: "kind" }],
          data.topics, { id: "topic-list", key: (t) => t.topic,
                         onClick: (t) => { location.hash = "#/topics/" + encodeURIComponent(t.topic); } }));
  sys.addEventListener("change", go);
}

async function pageTopic(main, topic) {
  const t = await api("GET", "/api/topics/" + encodeURIComponent(topic));
  const body = h("textarea", { id: "send-body", placeholder: "message body" });
  const tags = h("input", { id: "send-tags", placeholder: "tags" });
  const keys = h("input", { id: "send-keys", placeholder: "keys" });
  const result = h("div", { id: "send-result" });
  const send = h("form", { class: "card", id: "send-form", onsubmit: async (e) => {
    e.preventDefault();
    const r = await guarded(() => api("POST", `/api/topics/${encodeURIComponent(topic)}/messages`,
                                      { body: body.value, tags: tags.value, keys: keys.value }));
    if (r) {
      result.replaceChildren(`Sent: ${r.status}, msgId `,
        h("a", { href: `#/messages/${r.msg_id}?topic=${encodeURIComponent(topic)}`, id: "sent-msg-id" }, r.msg_id),
        ` to ${r.broker_name} queue ${r.queue_id} offset ${r.queue_offset}`);
    }
  } }, h("h3", {}, "Send a test message"), body,
     h("div", { class: "inline" }, h("label", {}, "Tags", tags), h("label", {}, "Keys", keys),
       h("button", { class: "primary", id: "send-button" }, "Send")), result);
  const qd = t.queue_datas[0] || { read_queue_nums: 4, write_queue_nums: 4, perm: 6 };
  const rq = h("input", { id: "upd-read", type: "number", value: qd.read_queue_nums, min: 1 });
  const wq = h("input", { id: "upd-write", type: "number", value: qd.write_queue_nums, min: 1 });
  const clusters = [...new Set(t.brokers.map((b) => b.cluster).filter(Boolean))];
  const update = h("form", { class: "inline card", id: "update-topic-form", onsubmit: async (e) => {
    e.preventDefault();
    for (const c of clusters) {
      const r = await guarded(() => api("POST", "/api/topics", { topic, cluster: c,
        read_queue_nums: Number(rq.value), write_queue_nums: Number(wq.value), perm: qd.perm }));
      if (!r) return;
    }
    flash(`Topic ${topic} updated`); route();
  } }, h("label", {}, "Read queues", rq), h("label", {}, "Write queues", wq),
     h("button", { id: "update-topic" }, "Update"),
     h("button", { type: "button", class: "danger", id: "delete-topic", onclick: async () => {
       const ok = await confirmByName("Delete topic",
         `Delete topic ${topic} from every broker and name server? Its messages become unreachable.`, topic);
       if (!ok) return;
       const r = await guarded(() => api("DELETE", "/api/topics/" + encodeURIComponent(topic), { confirm: ok }));
       if (r) { flash(`Topic ${topic} deleted`); location.hash = "#/topics"; }
     } }, "Delete topic"));
  main.replaceChildren(
    h("h2", {}, "Topic ", h("span", { id: "topic-name" }, t.topic)),
    h("div", { class: "cards" }, stat("Messages", fmt.num(t.total_messages), "topic-total"),
      stat("Queues", t.queues.length, "topic-queues"),
      stat("Consumer groups", t.consumer_groups.length)),
    h("h3", {}, "Route"),
    table([{ title: "Broker", key: "broker_name" }, { title: "Cluster", key: "cluster" },
           { title: "Addresses", render: (b) => Object.entries(b.addrs).map(([k, v]) => `${k}: ${v}`).join(", ") }],
          t.brokers),
    table([{ title: "Broker", key: "broker_name" }, { title: "Read queues", key: "read_queue_nums", num: true },
           { title: "Write queues", key: "write_queue_nums", num: true }, { title: "Perm", key: "perm_text" }],
          t.queue_datas),
    h("h3", {}, "Queues"),
    table([{ title: "Broker", key: "broker_name" }, { title: "Queue", key: "queue_id", num: true },
           { title: "Min offset", key: "min_offset", num: true, id: "min" },
           { title: "Max offset", key: "max_offset", num: true, id: "max" },
           { title: "Messages", key: "messages", num: true, id: "messages" },
           { title: "Last update", render: (q) => fmt.time(q.last_update_timestamp) }],
          t.queues, { id: "queue-table", key: (q) => q.broker_name + "/" + q.queue_id }),
    h("h3", {}, "Consumer groups"),
    h("p", { id: "topic-groups" }, t.consumer_groups.length ? t.consumer_groups.map((g) =>
      [h("a", { href: "#/groups/" + encodeURIComponent(g) }, g), " "]) : h("span", { class: "muted" }, "none")),
    send, h("h3", {}, "Update or delete"), update);
}

async function pageGroups(main, query) {
  const q = query.get("q") || "";
  const pageNo = Number(query.get("page")) || 1;
  const search = h("input", { id: "group-search", placeholder: "search groups", value: q });
  search.addEventListener("keydown", (e) => {
    if (e.key === "Enter") location.hash = "#/groups?q=" + encodeURIComponent(search.value);
  });
  const url = `/api/groups?q=${encodeURIComponent(q)}&page=${pageNo}`;
  const subs = (g) => g.subscription_consistent === false
    ? h("span", { class: "badge inconsistent", title: "its clients subscribe to different topics or tags" }, "inconsistent")
    : g.subscription_consistent ? "same" : "-";
  const render = (data) => h("div", { id: "group-list-wrap" },
    pager(data, "group-pager", (n) => { location.hash = `#/groups?q=${encodeURIComponent(q)}&page=${n}`; }),
    table([{ title: "Group", key: "group", id: "group" },
           { title: "Members", key: "members", num: true, id: "members" },
           { title: "Subscriptions", id: "subs", render: subs },
           { title: "Type", render: (g) => g.consume_type || "-" },
           { title: "Model", render: (g) => g.message_model || "-" },
           { title: "Version", render: (g) => g.version || "-" },
           { title: "Consume TPS", num: true, render: (g) => fmt.tps(g.consume_tps) },
           { title: "Lag", num: true, id: "lag", render: (g) => fmt.num(g.lag) },
           { title: "Topics", render: (g) => (g.topics || []).join(", ") },
           { title: "As of", render: (g) => fmt.clock(g.as_of) }],
          data.groups, { id: "group-list", key: (g) => g.group,
                         onClick: (g) => { location.hash = "#/groups/" + encodeURIComponent(g.group); } }));
  const first = await api("GET", url);
  const list = render(first);
  main.replaceChildren(h("h2", {}, "Consumer groups"),
    h("div", { class: "toolbar" }, search, h("span", { class: "muted" }, "refreshed every 5 s")),
    groupForm(null, first.clusters), list);
  let current = list;
  every(5000, async () => {  // lag and TPS move: redraw the table only
    const data = await guarded(() => api("GET", url));
    if (data && current.isConnected) { const next = render(data); current.replaceWith(next); current = next; }
  }, false);
}

// Create (config null) or update a subscription group on every master of a cluster.
function groupForm(config, clusters) {
  const c = config || { retry_max_times: 16, retry_queue_nums: 1, consume_enable: true,
                        consume_broadcast_enable: true, consume_from_min_enable: true,
                        broker_id: 0, which_broker_when_consume_slowly: 1,
                        notify_consumer_ids_changed_enable: true };
  const name = h("input", { id: "group-form-name", placeholder: "GroupName", value: config ? config.group_name : "",
                            readonly: config ? true : null });
  const cluster = h("select", { id: "group-form-cluster" }, clusters.map((x) => h("option", { value: x }, x)));
  const retries = h("input", { id: "group-form-retries", type: "number", min: -1, max: 1000, value: c.retry_max_times });
  const retryQueues = h("input", { id: "group-form-retry-queues", type: "number", min: 0, max: 64, value: c.retry_queue_nums });
  const checks = [["consume_enable", "Consume enabled"], ["consume_broadcast_enable", "Broadcast allowed"],
                  ["consume_from_min_enable", "From min allowed"]].map(([k, label]) =>
    [k, h("input", { type: "checkbox", id: "group-form-" + k, checked: c[k] ? true : null }), label]);
  return h("form", { class: "inline card", id: config ? "update-group-form" : "create-group-form", onsubmit: async (e) => {
    e.preventDefault();
    const settings = { retry_max_times: Number(retries.value), retry_queue_nums: Number(retryQueues.value) };
    for (const [k, box] of checks) settings[k] = box.checked;
    const r = await guarded(() => api("POST", "/api/groups", { group: name.value.trim(), cluster: cluster.value,
                                                            config: settings }));
    if (r) { flash(`Group ${r.group} ${config ? "updated" : "created"} on ${r.brokers.join(", ")}`); route(); }
  } }, h("label", {}, config ? "Group" : "New group", name), h("label", {}, "Cluster", cluster),
     h("label", {}, "Max retries", retries), h("label", {}, "Retry queues", retryQueues),
     checks.map(([, box, label]) => h("label", {}, label, box)),
     h("button", { class: "primary", id: config ? "update-group" : "create-group" }, config ? "Update" : "Create"));
}

async function pageGroup(main, group) {
  const g = await api("GET", "/api/groups/" + encodeURIComponent(group));
  const gc = await api("GET", `/api/groups/${encodeURIComponent(group)}/config`);
  const clusters = (await api("GET", "/api/groups?size=1")).clusters;
  const config = gc.brokers.length ? gc.brokers[0].config : null;
  const del = async () => {
    const ok = await confirmByName("Delete consumer group", `Delete group ${group} from every broker that has it?`, group);
    if (!ok) return;
    const r = await guarded(() => api("DELETE", "/api/groups/" + encodeURIComponent(group), { confirm: ok }));
    if (r) { flash(`Group ${group} deleted from ${r.brokers.join(", ")}`); location.hash = "#/groups"; }
  };
  const topics = [...new Set([...Object.keys(g.lag_by_topic), ...g.subscriptions.map((s) => s.topic)])]
    .filter((t) => !t.startsWith("%RETRY%"));
  const topicSel = h("select", { id: "reset-topic" }, topics.map((t) => h("option", { value: t }, t)));
  const when = timeInput("reset-time", Date.now() - 3600 * 1000);
  const reset = async (timestamp, what) => {
    const ok = await confirmByName(what, `${what} of group ${group} on topic ${topicSel.value}?`, group);
    if (!ok) return;
    const r = await guarded(() => api("POST", `/api/groups/${encodeURIComponent(group)}/reset`,
                                      { topic: topicSel.value, timestamp_ms: timestamp, confirm: ok }));
    if (r) { flash(`Offsets of ${group} on ${r.topic} reset (${r.mode}): ${r.offsets.length} queue(s)`); route(); }
  };
  main.replaceChildren(
    h("h2", {}, "Consumer group ", h("span", { id: "group-name" }, g.group)),
    h("div", { class: "cards" }, stat("Total lag", fmt.num(g.lag), "group-lag"),
      stat("Consume TPS", fmt.tps(g.consume_tps), "group-tps"),
      stat("Members", g.members.length, "group-members"),
      stat("State", g.online ? "online" : "offline", "group-state")),
    h("p", { class: "muted" }, `Consume type: ${g.consume_type || "-"}, model: ${g.message_model || "-"}, ` +
      `from: ${g.consume_from_where || "-"}`),
    h("h3", {}, "Members"),
    table([{ title: "Client id", id: "client_id", render: (m) => h("a", {
             href: `#/groups/${encodeURIComponent(group)}/clients/${encodeURIComponent(m.client_id)}`,
             title: "running info" }, m.client_id) }, { title: "Address", key: "client_addr" },
           { title: "Language", key: "language" }, { title: "Version", key: "version" }],
          g.members, { id: "member-table", empty: "no online client" }),
    g.subscription_consistent === false ? h("div", { class: "warning", id: "subscription-warning" },
      "The clients of this group subscribe differently: each gets only part of the queues of a topic, " +
      "so messages whose tags another client filters out are skipped. ",
      g.subscription_issues.map((i) => h("div", { class: "issue", "data-topic": i.topic }, `${i.topic}: ` +
        Object.entries(i.by_expression).map(([e, cs]) => `'${e}' by ${cs.join(", ")}`).join("; ") +
        (i.missing.length ? `; not subscribed by ${i.missing.join(", ")}` : "")))) : "",
    h("h3", {}, "Subscriptions per client"),
    table([{ title: "Client id", key: "client_id", id: "client_id" },
           { title: "Topic", key: "topic", id: "topic" },
           { title: "Expression", key: "expression", id: "expression" },
           { title: "Type", key: "expression_type" }],
          g.clients.flatMap((c) => c.error ? [{ client_id: c.client_id, topic: "-", expression: c.error, expression_type: "" }]
            : c.subscriptions.map((x) => ({ client_id: c.client_id, ...x }))),
          { id: "client-subscriptions", key: (r) => `${r.client_id}/${r.topic}`, empty: "no online client" }),
    h("h3", {}, "Lag per queue"),
    table([{ title: "Topic", key: "topic" }, { title: "Broker", key: "broker_name" },
           { title: "Queue", key: "queue_id", num: true },
           { title: "Broker offset", key: "broker_offset", num: true },
           { title: "Consumer offset", key: "consumer_offset", num: true, id: "consumer_offset" },
           { title: "Lag", num: true, id: "lag", render: (q) => h("span", { class: q.lag > 0 ? "lag-bad" : null }, fmt.num(q.lag)) },
           { title: "Last consumed", render: (q) => fmt.time(q.last_timestamp) }],
          g.queues, { id: "lag-table", key: (q) => `${q.topic}/${q.broker_name}/${q.queue_id}` }),
    h("h3", {}, "Reset offset"),
    h("div", { class: "inline card" }, h("label", {}, "Topic", topicSel), h("label", {}, "To time", when),
      h("button", { class: "danger", id: "reset-button", onclick: () =>
        guarded(() => reset(timeOf(when), "Reset offsets")) }, "Reset to time"),
      h("button", { class: "danger", id: "skip-button", onclick: () => reset(-1, "Skip the backlog") },
        "Skip backlog")),
    h("h3", {}, "Subscription group config"),
    table([{ title: "Broker", key: "broker_name" }, { title: "Address", key: "addr" },
           ...(config ? Object.keys(config).filter((k) => k !== "group_name").map((k) => ({
             title: k, id: k, render: (b) => String(b.config[k]) })) : [])],
          gc.brokers, { id: "group-config", key: (b) => b.broker_name }),
    config ? groupForm(config, clusters) : "",
    h("div", { class: "inline" }, h("button", { class: "danger", id: "delete-group", onclick: del }, "Delete group")));
}

async function pageClient(main, group, clientId) {
  const r = await api("GET", `/api/groups/${encodeURIComponent(group)}/clients/${encodeURIComponent(clientId)}`);
  main.replaceChildren(h("h2", {}, "Client ", h("span", { id: "client-id" }, r.client_id)),
    h("p", {}, h("a", { href: "#/groups/" + encodeURIComponent(group) }, "\u2039 group " + group)),
    h("h3", {}, "Subscriptions"),
    table([{ title: "Topic", key: "topic" }, { title: "Expression", key: "expression" },
           { title: "Type", key: "expression_type" }, { title: "Version", render: (x) => fmt.time(x.sub_version) }],
          r.subscriptions, { id: "client-subs", key: (x) => x.topic }),
    h("h3", {}, "Consume status per topic"),
    table([{ title: "Topic", key: "topic" },
           { title: "Pull RT (ms)", num: true, render: (x) => fmt.tps(x.pull_rt) },
           { title: "Pull TPS (msg/s)", num: true, render: (x) => fmt.tps(x.pull_tps) },
           { title: "Consume RT (ms)", num: true, render: (x) => fmt.tps(x.consume_rt) },
           { title: "Consume OK TPS (msg/s)", num: true, id: "ok_tps", render: (x) => fmt.tps(x.consume_ok_tps) },
           { title: "Failed TPS (msg/s)", num: true, render: (x) => fmt.tps(x.consume_failed_tps) },
           { title: "Failed in the last hour", num: true, render: (x) => fmt.num(x.consume_failed_msgs) }],
          r.status, { id: "client-status", key: (x) => x.topic }),
    h("h3", {}, "Queues held"),
    table([{ title: "Topic", key: "topic" }, { title: "Broker", key: "broker_name" },
           { title: "Queue", key: "queue_id", num: true },
           { title: "Commit offset", key: "commit_offset", num: true, id: "commit_offset" },
           { title: "Cached messages", key: "cached_msg_count", num: true },
           { title: "Cached (MiB)", key: "cached_msg_size_in_mib", num: true },
           { title: "Locked", render: (x) => x.locked ? "yes" : "no" },
           { title: "Last pull", render: (x) => fmt.time(x.last_pull_timestamp) },
           { title: "Last consume", render: (x) => fmt.time(x.last_consume_timestamp) }],
          r.queues, { id: "client-queues", key: (x) => `${x.topic}/${x.broker_name}/${x.queue_id}` }),
    h("h3", {}, "Properties"),
    table([{ title: "Key", key: "k" }, { title: "Value", key: "v", id: "value" }],
          Object.entries(r.properties).map(([k, v]) => ({ k, v })), { id: "client-properties", key: (x) => x.k }));
}

async function pageBroker(main, addr) {
  const r = await api("GET", "/api/brokers/" + encodeURIComponent(addr) + "/config");
  const rows = Object.entries(r.config).map(([k, v]) => ({ k, v }));
  const filter = h("input", { id: "config-filter", placeholder: "filter keys" });
  let shown = table([{ title: "Key", key: "k" }, { title: "Value", key: "v", id: "value" }], rows,
                    { id: "broker-config", key: (x) => x.k });
  filter.addEventListener("input", () => {
    const f = filter.value.toLowerCase();
    const next = table([{ title: "Key", key: "k" }, { title: "Value", key: "v", id: "value" }],
                       rows.filter((x) => x.k.toLowerCase().includes(f)), { id: "broker-config", key: (x) => x.k });
    shown.replaceWith(next); shown = next;
  });
  main.replaceChildren(h("h2", {}, "Broker ", h("span", { id: "broker-name" }, `${r.broker_name} (${r.broker_id})`)),
    h("p", { class: "muted" }, `${r.addr}; ${rows.length} settings; data version ${r.version || "-"}`),
    h("div", { class: "toolbar" }, filter), shown);
}

async function pageMessages(main, query) {
  const now = Date.now();
  const topic = h("input", { id: "msg-topic", placeholder: "topic", value: query.get("topic") || "" });
  const begin = timeInput("msg-begin", Number(query.get("begin")) || now - 3600 * 1000);
  const end = timeInput("msg-end", Number(query.get("end")) || now + 60 * 1000);
  const key = h("input", { id: "msg-key", placeholder: "message key", value: query.get("key") || "" });
  const id = h("input", { id: "msg-id", placeholder: "message id or unique key", size: 36 });
  const results = h("div", { id: "msg-results" });
  const show = (data) => {
    results.replaceChildren(
      h("p", { class: "muted", id: "msg-count" }, `${data.messages.length} message(s)` +
        (data.truncated ? " (truncated: narrow the time range)" : "")),
      table([{ title: "Message id", key: "msg_id", id: "msg_id" }, { title: "Tags", key: "tags" },
             { title: "Keys", key: "keys", id: "keys" }, { title: "Queue", key: "queue_id", num: true },
             { title: "Offset", key: "queue_offset", num: true },
             { title: "Stored", render: (m) => fmt.time(m.store_timestamp) },
             { title: "Size", num: true, render: (m) => fmt.bytes(m.body_size) }],
            data.messages, { id: "msg-table", key: (m) => m.msg_id,
              onClick: (m) => { location.hash = `#/messages/${m.msg_id}?topic=${encodeURIComponent(m.topic)}`; } }));
  };
  const byTime = async (e) => {
    e.preventDefault();
    const r = await guarded(() => api("GET", `/api/messages?topic=${encodeURIComponent(topic.value)}` +
                                      `&begin=${timeOf(begin)}&end=${timeOf(end)}`));
    if (r) { clearFlash(); show(r); }
  };
  const byKey = async (e) => {
    e.preventDefault();
    const r = await guarded(() => api("GET", `/api/messages?topic=${encodeURIComponent(topic.value)}&key=${encodeURIComponent(key.value)}`));
    if (r) { clearFlash(); show(r); }
  };
  const byId = (e) => {
    e.preventDefault();
    location.hash = `#/messages/${encodeURIComponent(id.value.trim())}?topic=${encodeURIComponent(topic.value)}`;
  };
  main.replaceChildren(h("h2", {}, "Messages"),
    h("div", { class: "toolbar" }, h("label", {}, "Topic", topic)),
    h("form", { class: "inline card", id: "by-time", onsubmit: byTime }, h("label", {}, "From", begin),
      h("label", {}, "To", end), h("button", { class: "primary", id: "search-time" }, "Search by time")),
    h("form", { class: "inline card", id: "by-key", onsubmit: byKey }, h("label", {}, "Key", key),
      h("button", { class: "primary", id: "search-key" }, "Search by key")),
    h("form", { class: "inline card", id: "by-id", onsubmit: byId }, h("label", {}, "Message id", id),
      h("button", { class: "primary", id: "search-id" }, "Look up")),
    results);
  if (query.get("key") && topic.value) await byKey(new Event("submit"));
}

async function pageMessage(main, msgId, query) {
  const topic = query.get("topic") || "";
  const preview = query.get("preview") || "text";
  const m = await api("GET", `/api/messages/${encodeURIComponent(msgId)}?topic=${encodeURIComponent(topic)}&preview=${preview}`);
  const mode = h("select", { id: "preview-mode", onchange: () => {
    location.hash = `#/messages/${encodeURIComponent(msgId)}?topic=${encodeURIComponent(topic)}&preview=${mode.value}`;
  } }, ["text", "json", "hex"].map((p) => h("option", { value: p, selected: p === preview ? true : null }, p)));
  const group = h("select", { id: "resend-group" }, m.consumer_groups.map((g) => h("option", { value: g }, g)));
  const resendOut = h("span", { id: "resend-result" });
  main.replaceChildren(h("h2", {}, "Message ", h("span", { id: "message-id" }, m.msg_id)),
    table([{ title: "Field", key: "k" }, { title: "Value", key: "v", id: "value" }], [
      { k: "Topic", v: m.topic }, { k: "Tags", v: m.tags || "-" }, { k: "Keys", v: m.keys || "-" },
      { k: "Queue", v: `${m.queue_id} @ ${m.queue_offset}` }, { k: "Offset message id", v: m.offset_msg_id },
      { k: "Born", v: `${fmt.time(m.born_timestamp)} from ${m.born_host}` },
      { k: "Stored", v: `${fmt.time(m.store_timestamp)} at ${m.store_host}` },
      { k: "Body size", v: fmt.bytes(m.body.size) }, { k: "Reconsume times", v: m.reconsume_times }],
      { id: "message-fields", key: (r) => r.k }),
    h("h3", {}, "Body ", mode),
    m.body.note ? h("p", { class: "muted", id: "body-note" }, m.body.note) : "",
    h("pre", { id: "message-body" }, m.body.content),
    m.body.truncated ? h("p", { class: "muted" }, "preview truncated") : "",
    h("h3", {}, "Properties"),
    table([{ title: "Key", key: "k" }, { title: "Value", key: "v" }],
          Object.entries(m.properties).map(([k, v]) => ({ k, v })), { id: "property-table", key: (r) => r.k }),
    h("p", {}, h("a", { id: "trace-link", href: `#/messages/${encodeURIComponent(m.msg_id)}/trace` }, "Message trace \u203a")),
    h("h3", {}, "Resend to a consumer group"),
    h("div", { class: "inline card" }, h("label", {}, "Group", group),
      h("button", { id: "resend-button", onclick: async () => {
        const r = await guarded(() => api("POST", `/api/messages/${encodeURIComponent(msgId)}/resend`,
                                          { group: group.value, topic: m.topic }));
        if (r) resendOut.textContent = `${r.consume_result} by ${r.client_id}`;
      } }, "Resend"), resendOut));
}

async function pageTrace(main, msgId, query) {
  const traceTopic = query.get("trace_topic") || "";
  const r = await api("GET", `/api/messages/${encodeURIComponent(msgId)}/trace?trace_topic=${encodeURIComponent(traceTopic)}`);
  main.replaceChildren(h("h2", {}, "Trace of ", h("span", { id: "trace-msg-id" }, r.msg_id)),
    h("p", { class: "muted" }, `trace topic ${r.trace_topic}; ${r.records.length} record(s)`),
    table([{ title: "Type", key: "msg_type", id: "type" }, { title: "Group", key: "group_name", id: "group" },
           { title: "Client host", key: "client_host" }, { title: "Time", render: (x) => fmt.time(x.time_stamp) },
           { title: "Cost (ms)", num: true, render: (x) => fmt.num(x.cost_time) },
           { title: "Status", key: "status", id: "status" }, { title: "Topic", render: (x) => x.topic || "-" },
           { title: "Tags", render: (x) => x.tags || "-" }, { title: "Store host", render: (x) => x.store_host || "-" }],
          r.records, { id: "trace-table", key: (x) => `${x.msg_type}/${x.group_name}`,
                       empty: "no trace records (was the client started with message trace on?)" }));
}

async function pageDlq(main, query) {
  const now = Date.now();
  const group = h("input", { id: "dlq-group", placeholder: "consumer group", value: query.get("group") || "" });
  const begin = timeInput("dlq-begin", Number(query.get("begin")) || now - 24 * 3600 * 1000);
  const end = timeInput("dlq-end", Number(query.get("end")) || now + 60 * 1000);
  const results = h("div", { id: "dlq-results" });
  const range = () => `group=${encodeURIComponent(group.value.trim())}&begin=${timeOf(begin)}` +
                      `&end=${timeOf(end)}`;
  const show = (data) => {
    const boxes = new Map();
    const out = h("div", { id: "dlq-resend-results" });
    const resend = async () => {
      const ids = [...boxes].filter(([, b]) => b.checked).map(([id]) => id);
      if (!ids.length) { flash("select the messages to resend", "error"); return; }
      const r = await guarded(() => api("POST", "/api/dlq/resend", { group: data.group, msg_ids: ids }));
      if (r) out.replaceChildren(table([{ title: "Message id", key: "msg_id" },
        { title: "Result", id: "result", render: (x) => x.ok ? `${x.consume_result} by ${x.client_id}` : (x.consume_result || x.error) }],
        r.results, { id: "dlq-resend-table", key: (x) => x.msg_id }));
    };
    results.replaceChildren(
      h("p", { class: "muted", id: "dlq-count" }, data.exists
        ? `${data.messages.length} message(s) in ${data.topic}` + (data.truncated ? " (truncated: narrow the time range)" : "")
        : `${data.topic} does not exist: nothing of ${data.group} went to the dead-letter queue`),
      h("div", { class: "inline" },
        h("a", { href: `/api/dlq/export?${range()}`, id: "dlq-export", download: "" }, "Export (JSON)"),
        h("button", { id: "dlq-resend", onclick: resend }, "Resend selected to the group")),
      table([{ title: "", render: (m) => { const b = h("input", { type: "checkbox", "data-msg": m.msg_id }); boxes.set(m.msg_id, b); return b; } },
             { title: "Message id", id: "msg_id", render: (m) => h("a", { href: `#/messages/${m.msg_id}?topic=${encodeURIComponent(data.topic)}` }, m.msg_id) },
             { title: "Origin topic", key: "origin_topic", id: "origin_topic" }, { title: "Keys", key: "keys" },
             { title: "Retried", key: "reconsume_times", num: true }, { title: "Stored", render: (m) => fmt.time(m.store_timestamp) },
             { title: "Size", num: true, render: (m) => fmt.bytes(m.body_size) }],
            data.messages, { id: "dlq-table", key: (m) => m.msg_id, empty: "no dead letters in this time range" }),
      out);
  };
  const search = async (e) => {
    if (e) e.preventDefault();
    const r = await guarded(() => api("GET", `/api/dlq?${range()}`));
    if (r) { clearFlash(); show(r); }
  };
  main.replaceChildren(h("h2", {}, "Dead letters"),
    h("form", { class: "inline card", id: "dlq-form", onsubmit: search }, h("label", {}, "Group", group),
      h("label", {}, "From", begin), h("label", {}, "To", end),
      h("button", { class: "primary", id: "dlq-search" }, "Search")), results);
  if (group.value) await search();
}

async function pageAcl(main) {
  const data = await api("GET", "/api/acl");
  const b0 = data.brokers.find((b) => !b.error) || data.brokers[0] || { accounts: [], global_white_addrs: [] };
  const ak = h("input", { id: "acl-ak", placeholder: "access key", autocomplete: "off" });
  const sk = h("input", { id: "acl-sk", type: "password", placeholder: "secret key", autocomplete: "new-password" });
  const white = h("input", { id: "acl-white", placeholder: "192.168.0.*" });
  const admin = h("input", { id: "acl-admin", type: "checkbox" });
  const perm = (id) => h("select", { id }, ["", "DENY", "PUB", "SUB", "PUB|SUB"].map((p) => h("option", { value: p }, p || "-")));
  const topicPerm = perm("acl-topic-perm"), groupPerm = perm("acl-group-perm");
  const topicPerms = h("input", { id: "acl-topic-perms", placeholder: "TopicA=PUB,TopicB=SUB", size: 30 });
  const groupPerms = h("input", { id: "acl-group-perms", placeholder: "GroupA=SUB", size: 24 });
  const list = (v) => v.split(",").map((x) => x.trim()).filter(Boolean);
  const save = h("form", { class: "inline card", id: "acl-account-form", onsubmit: async (e) => {
    e.preventDefault();
    const r = await guarded(() => api("POST", "/api/acl/accounts", { access_key: ak.value.trim(), secret_key: sk.value,
      white_remote_address: white.value.trim(), admin: admin.checked, default_topic_perm: topicPerm.value,
      default_group_perm: groupPerm.value, topic_perms: list(topicPerms.value), group_perms: list(groupPerms.value) }));
    if (r) { flash(`Account ${r.access_key} saved on ${r.brokers.join(", ")}`); route(); }
  } }, h("label", {}, "Access key", ak), h("label", {}, "Secret key", sk), h("label", {}, "White address", white),
     h("label", {}, "Admin", admin), h("label", {}, "Default topic perm", topicPerm),
     h("label", {}, "Default group perm", groupPerm), h("label", {}, "Topic perms", topicPerms),
     h("label", {}, "Group perms", groupPerms), h("button", { class: "primary", id: "acl-save" }, "Save account"));
  const del = async (a) => {
    const ok = await confirmByName("Delete ACL account", `Delete account ${a.access_key} from every broker?`, a.access_key);
    if (!ok) return;
    const r = await guarded(() => api("DELETE", "/api/acl/accounts/" + encodeURIComponent(a.access_key), { confirm: ok }));
    if (r) { flash(`Account ${r.access_key} deleted`); route(); }
  };
  const whiteList = h("input", { id: "acl-global-white", size: 50, value: b0.global_white_addrs.join(", ") });
  main.replaceChildren(h("h2", {}, "ACL"),
    h("p", { class: "muted" }, "plain_acl accounts of every master broker (aclEnable=true); changes go to every master."),
    data.brokers.filter((b) => b.error).map((b) => h("p", { class: "lag-bad" }, `${b.broker_name} (${b.addr}): ${b.error}`)),
    h("h3", {}, "Global white list"),
    h("form", { class: "inline card", id: "acl-white-form", onsubmit: async (e) => {
      e.preventDefault();
      const r = await guarded(() => api("PUT", "/api/acl/white-list", { addrs: list(whiteList.value) }));
      if (r) { flash(`Global white list saved: ${r.global_white_addrs.join(", ") || "(empty)"}`); route(); }
    } }, h("label", {}, "Addresses (comma separated)", whiteList), h("button", { class: "primary", id: "acl-white-save" }, "Save")),
    h("h3", {}, "Accounts"),
    table([{ title: "Access key", key: "access_key", id: "access_key" }, { title: "Secret", key: "secret_key" },
           { title: "Admin", id: "admin", render: (a) => a.admin ? "yes" : "no" },
           { title: "White address", render: (a) => a.white_remote_address || "-" },
           { title: "Default topic", render: (a) => a.default_topic_perm || "-" },
           { title: "Default group", render: (a) => a.default_group_perm || "-" },
           { title: "Topic perms", id: "topic_perms", render: (a) => a.topic_perms.join(", ") || "-" },
           { title: "Group perms", render: (a) => a.group_perms.join(", ") || "-" },
           { title: "", render: (a) => h("button", { class: "danger", "data-delete": a.access_key, onclick: (e) => { e.stopPropagation(); del(a); } }, "Delete") }],
          b0.accounts, { id: "acl-accounts", key: (a) => a.access_key, empty: "no account (or ACL is off on the brokers)" }),
    h("h3", {}, "Create or update an account"), save);
}

async function pageConnections(main, query) {
  const pg = query.get("producer_group") || "", pt = query.get("topic") || "";
  const data = await api("GET", `/api/connections?producer_group=${encodeURIComponent(pg)}&topic=${encodeURIComponent(pt)}`);
  const group = h("input", { id: "producer-group", placeholder: "producer group", value: pg });
  const topic = h("input", { id: "producer-topic", placeholder: "topic", value: pt });
  main.replaceChildren(h("h2", {}, "Connections"), h("h3", {}, "Consumers"));
  const rows = data.consumers.flatMap((c) => c.members.map((m) => ({ group: c.group, ...m })));
  main.append(table([{ title: "Group", key: "group" }, { title: "Client id", key: "client_id" },
                     { title: "Address", key: "client_addr" }, { title: "Language", key: "language" },
                     { title: "Version", key: "version" }], rows,
                    { id: "consumer-connections", key: (r) => r.group, empty: "no online consumer" }));
  main.append(h("h3", {}, "Producers"),
    h("form", { class: "inline card", onsubmit: (e) => {
      e.preventDefault();
      location.hash = `#/connections?producer_group=${encodeURIComponent(group.value)}&topic=${encodeURIComponent(topic.value)}`;
    } }, h("label", {}, "Producer group", group), h("label", {}, "Topic", topic),
      h("button", { class: "primary", id: "producer-lookup" }, "Look up")));
  if (data.producers) {
    main.append(table([{ title: "Client id", key: "client_id" }, { title: "Address", key: "client_addr" },
                       { title: "Language", key: "language" }, { title: "Version", key: "version" }],
                      data.producers.members, { id: "producer-connections", empty: "no producer of this group" }));
  }
}

async function pageLive(main) {
  const charts = h("div", { id: "live-charts" });
  const status = h("p", { class: "muted", id: "live-status" }, "sampling...");
  main.replaceChildren(h("h2", {}, "Live"), status, charts);
  every(2000, async () => {
    const live = await guarded(() => api("GET", "/api/live"));
    if (!live) return;
    const samples = live.samples;
    const brokers = [...new Set(samples.flatMap((s) => Object.keys(s.brokers)))].sort();
    const groups = [...new Set(samples.flatMap((s) => Object.keys(s.lag)))].sort();
    const series = (pick, names) => names.map((n) => ({ name: n,
      points: samples.filter((s) => pick(s, n) !== undefined).map((s) => [s.t, pick(s, n)]) }));
    const last = samples[samples.length - 1];
    status.textContent = live.last_error
      ? "last sample failed: " + live.last_error
      : `${samples.length} sample(s), one every ${live.interval_ms / 1000} s; last ${last ? fmt.time(last.t) : "-"}`;
    charts.replaceChildren(h("div", { class: "grid2" },
      lineChart("TPS in (put) per broker", series((s, n) => s.brokers[n] && s.brokers[n].put_tps, brokers), "chart-put", fmt.tps, "msg/s"),
      lineChart("TPS out (get) per broker", series((s, n) => s.brokers[n] && s.brokers[n].get_tps, brokers), "chart-get", fmt.tps, "msg/s")),
      h("div", { class: "grid2" },
      lineChart("Lag per consumer group", series((s, n) => s.lag[n], groups), "chart-lag", fmt.num, "messages"),
      table([{ title: "Group", key: "g" }, { title: "Lag now", key: "v", num: true, id: "lag" }],
            groups.map((g) => ({ g, v: last && last.lag[g] !== undefined ? fmt.num(last.lag[g]) : "-" })),
            { id: "live-lag", key: (r) => r.g })));
  });
}

function pageLogin(main) {
  const user = h("input", { id: "login-user", autocomplete: "username" });
  const pass = h("input", { id: "login-password", type: "password", autocomplete: "current-password" });
  main.replaceChildren(h("form", { class: "card login", id: "login-form", onsubmit: async (e) => {
    e.preventDefault();
    const s = await guarded(() => api("POST", "/api/login", { username: user.value, password: pass.value }));
    if (s) { state.session = s; clearFlash(); showWho(); location.hash = "#/cluster"; }
  } }, h("h2", {}, "Sign in"), h("label", {}, "User", user), h("label", {}, "Password", pass),
     h("button", { class: "primary", id: "login-button" }, "Sign in")));
}

function showWho() {
  const who = document.getElementById("whoami");
  const s = state.session;
  if (!s || !s.authenticated) { who.replaceChildren(); return; }
  who.replaceChildren(`${s.user} (${s.role})`, s.login_required ? h("button", { id: "logout", onclick: async () => {
    await guarded(() => api("POST", "/api/logout", {}));
    state.session = await api("GET", "/api/session");
    showWho(); location.hash = "#/login";
  } }, "Sign out") : "");
}

const PAGES = [
  [/^\/cluster$/, (m) => pageCluster(m), "cluster"],
  [/^\/topics$/, (m, q) => pageTopics(m, q), "topics"],
  [/^\/topics\/(.+)$/, (m, q, a) => pageTopic(m, a), "topics"],
  [/^\/groups$/, (m, q) => pageGroups(m, q), "groups"],
  [/^\/groups\/([^/]+)\/clients\/(.+)$/, (m, q, a, b) => pageClient(m, a, b), "groups"],
  [/^\/groups\/(.+)$/, (m, q, a) => pageGroup(m, a), "groups"],
  [/^\/brokers\/(.+)$/, (m, q, a) => pageBroker(m, a), "cluster"],
  [/^\/messages$/, (m, q) => pageMessages(m, q), "messages"],
  [/^\/messages\/([^/]+)\/trace$/, (m, q, a) => pageTrace(m, a, q), "messages"],
  [/^\/messages\/(.+)$/, (m, q, a) => pageMessage(m, a, q), "messages"],
  [/^\/dlq$/, (m, q) => pageDlq(m, q), "dlq"],
  [/^\/connections$/, (m, q) => pageConnections(m, q), "connections"],
  [/^\/timers$/, (m) => pageTimers(m), "timers"],
  [/^\/live$/, (m) => pageLive(m), "live"],
  [/^\/acl$/, (m) => pageAcl(m), "acl"],
  [/^\/login$/, (m) => pageLogin(m), "login"],
];

async function route() {
  stopTimers();
  const gen = ++state.gen;
  await state.ready;
  const raw = location.hash.slice(1) || "/cluster";
  const [path, qs] = raw.split("?");
  const query = new URLSearchParams(qs || "");
  const main = document.getElementById("main");
  if (state.session.login_required && !state.session.authenticated && path !== "/login") {
    location.hash = "#/login"; return;
  }
  for (const [re, fn, nav] of PAGES) {
    const m = re.exec(path);
    if (!m) continue;
    document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === nav));
    main.setAttribute("aria-busy", "true");
    // Each page renders into its own element, shown only if no newer route started meanwhile.
    const view = h("div", { class: "view" });
    try {
      await fn(view, query, m[1] ? decodeURIComponent(m[1]) : undefined,
               m[2] ? decodeURIComponent(m[2]) : undefined);
      if (state.keepFlash) state.keepFlash = false; else clearFlash();
    } catch (e) {
      view.replaceChildren(h("h2", {}, "Error"), h("p", { class: "lag-bad", id: "page-error" }, e.message));
    }
    if (gen !== state.gen) return;
    main.replaceChildren(view);
    main.dataset.page = nav;
    main.dataset.route = raw;
    main.setAttribute("aria-busy", "false");
    return;
  }
  main.replaceChildren(h("h2", {}, "Not found"), h("p", {}, "No page " + path));
}

state.ready = api("GET", "/api/session").then((s) => { state.session = s; showWho(); });
window.addEventListener("hashchange", () => { route(); });
window.addEventListener("DOMContentLoaded", () => { route(); });
