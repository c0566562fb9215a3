// The operations console. The admin token stays in this tab's sessionStorage and goes out
// only as an Authorization header to /admin/*, never in a URL.
"use strict";

const TOKEN = "orderpay.adminToken";
const tabs = [["orders", "Orders"], ["pending", "Pending queries"], ["stuck", "Stuck payments"], ["refunds", "Auto refunds"], ["recon", "Reconciliation"], ["charts", "Charts"]];

async function admin(path, opts = {}) {
  try {
    return await api(path, Object.assign({}, opts, { headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN) } }));
  } catch (e) {
    if (e.status === 401) { sessionStorage.removeItem(TOKEN); showLogin("The token was refused."); }
    throw e;
  }
}

function showLogin(msg) {
  $("#console").classList.add("hidden");
  $("#login").classList.remove("hidden");
  $("#login-error").textContent = msg || "";
}

async function login(ev) {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN, $("#token").value);
  $("#token").value = "";
  try {
    await admin("/admin/orders?q=");
  } catch (e) {
    if (e.status !== 401) $("#login-error").textContent = e.message;
    return;
  }
  showConsole();
}

function showConsole() {
  $("#login").classList.add("hidden");
  $("#console").classList.remove("hidden");
  const no = new URLSearchParams(location.hash.slice(1)).get("order");
  search(no || "");
  if (no) timeline(no);
}

function showTab(name) {
  for (const [n] of tabs) {
    $("#tab-" + n).classList.toggle("hidden", n !== name);
    $("#tabbtn-" + n).classList.toggle("active", n === name);
  }
  $("#error").textContent = "";
  const loaders = { pending: loadPending, stuck: loadStuck, refunds: loadRefunds, recon: loadReconciliations, charts: loadCharts };
  if (loaders[name]) loaders[name]().catch((e) => { $("#error").textContent = e.message; });
}

function table(headers, rows, empty) {
  if (rows.length === 0) return el("p", { class: "muted" }, empty || "none");
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, ""))))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c, i) => el("td", { class: headers[i].startsWith("#") ? "num" : "" }, c))))));
}

function badge(s) { return el("span", { class: "status " + s }, s); }

function orderLink(no) { return el("a", { href: "#order=" + encodeURIComponent(no), dataset: { order: no }, onclick: (e) => { e.preventDefault(); history.replaceState(null, "", "#order=" + encodeURIComponent(no)); timeline(no); } }, no); }

async function search(q) {
  $("#error").textContent = "";
  try {
    const res = await admin("/admin/orders?q=" + encodeURIComponent(q));
    $("#order-results tbody").replaceChildren(...res.orders.map((o) => el("tr", {},
      el("td", {}, orderLink(o.order_no)), el("td", {}, o.buyer_id), el("td", {}, badge(o.status)),
      el("td", { class: "num" }, money(o.payable)), el("td", {}, fmtTime(o.created_at)))));
    if (res.orders.length === 0) $("#order-results tbody").append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "no orders match")));
  } catch (e) {
    $("#error").textContent = e.message;
  }
}

function rawBlock(raw) {
  return raw ? el("details", {}, el("summary", {}, "raw"), el("pre", {}, raw)) : "";
}

function describe(ev) {
  switch (ev.kind) {
    case "notification":
      return el("div", {}, ev.channel + " notification about " + (ev.entity_no || "?") + " — verified ",
        el("span", { class: ev.verified ? "yes verified" : "no verified", dataset: { verified: String(ev.verified) } }, ev.verified ? "yes" : "no"),
        ", ", el("strong", { class: "result" }, ev.result), ev.detail ? el("div", { class: "muted" }, ev.detail) : "", rawBlock(ev.raw));
    case "query":
      return el("div", {}, "query " + ev.channel + " about " + ev.entity_no + " (" + ev.trigger + ") → ", el("strong", {}, ev.outcome),
        ev.detail ? el("div", { class: "muted" }, ev.detail) : "");
    default:
      return el("div", {}, ev.entity + " " + ev.entity_no + ": " + (ev.from ? ev.from + " → " : "created "), el("strong", {}, ev.to), " (" + ev.event + ", by " + ev.actor + ")",
        ev.reason ? el("div", { class: "muted" }, ev.reason) : "", rawBlock(ev.raw));
  }
}

async function timeline(no) {
  const box = $("#timeline");
  box.replaceChildren(el("p", { class: "muted" }, "loading…"));
  let t;
  try {
    t = await admin("/admin/orders/" + encodeURIComponent(no) + "/timeline");
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  const p = t.payment;
  box.replaceChildren(
    el("h2", { id: "timeline-title" }, "Timeline of order " + t.order.order_no),
    el("div", { class: "card kv" },
      el("span", { class: "muted" }, "Order"), el("span", {}, badge(t.order.status), " " + money(t.order.payable) + ", buyer " + t.order.buyer_id),
      el("span", { class: "muted" }, "Payment"), el("span", {}, p ? [p.payment_no + " ", badge(p.status), " refunded " + money(p.refunded)] : "none yet")),
    el("h2", {}, "Attempts"),
    table(["out_trade_no", "Channel", "Status", "#Amount", "Created", "Paid"], t.attempts.map((a) =>
      [a.out_trade_no, a.channel, [badge(a.status), a.unknown ? " unknown" : ""], money(a.amount), fmtTime(a.created_at), fmtTime(a.paid_at)])),
    el("h2", {}, "Refunds"),
    table(["out_refund_no", "Reason", "Status", "#Amount", "Created"], t.refunds.map((r) =>
      [r.out_refund_no, r.reason, badge(r.status), money(r.amount), fmtTime(r.created_at)])),
    el("h2", {}, "Events"),
    el("table", { id: "events" }, el("tbody", {}, t.events.map((ev) => el("tr", { dataset: { kind: ev.kind } },
      el("td", {}, fmtTime(ev.at)), el("td", {}, el("span", { class: "kind " + ev.kind }, ev.kind)), el("td", {}, describe(ev)))))));
}

function pendingTable(rows) {
  return table(["out_trade_no", "Payment", "Channel", "#Queries", "Next", "Flagged", "Last answer"], rows.map((q) =>
    [q.out_trade_no, q.payment_no, q.channel, q.attempts, fmtTime(q.next_at), q.flagged ? "yes" : "", q.last_outcome || ""]));
}

async function loadPending() {
  $("#pending").replaceChildren(pendingTable((await admin("/admin/pending-queries")).pending_queries));
}

async function loadStuck() {
  const s = await admin("/admin/payments/stuck");
  $("#stuck").replaceChildren(
    el("h2", {}, "Open past deadline + grace"),
    table(["Payment", "Order", "Status", "#Amount", "Deadline"], s.open_past_deadline.map((p) =>
      [p.payment_no, orderLink(p.order_no), badge(p.status), money(p.amount), fmtTime(p.pay_deadline)])),
    el("h2", {}, "Queries exhausted"), pendingTable(s.queries_exhausted));
}

async function loadRefunds() {
  const r = await admin("/admin/refunds");
  $("#refunds").replaceChildren(table(["out_refund_no", "Payment", "Reason", "Status", "#Amount", "Created", "Refunded"], r.refunds.map((x) =>
    [x.out_refund_no, x.payment_no, x.reason, badge(x.status), money(x.amount), fmtTime(x.created_at), fmtTime(x.refunded_at)])));
}

// The five classes of a reconciliation item, in the order the reports show them.
const reconClasses = ["MATCHED", "MISSING_LOCAL", "MISSING_CHANNEL", "AMOUNT_MISMATCH", "REFUND_MISMATCH"];

// yesterdayInChina is the bill date a run can have today: bills are dated by China time.
function yesterdayInChina() {
  return new Date(Date.now() + 8 * 3600e3 - 86400e3).toISOString().slice(0, 10);
}

async function loadReconciliations() {
  if (!$("#recon-date").value) $("#recon-date").value = yesterdayInChina();
  const res = await admin("/admin/reconciliations");
  const list = $("#recon-list");
  if (res.reconciliations.length === 0) {
    list.replaceChildren(el("p", { class: "muted", id: "recon-empty" }, "No reports yet: the daily run writes one per channel, or run one above."));
    return;
  }
  list.replaceChildren(el("table", { id: "recon-reports" },
    el("thead", {}, el("tr", {}, ["Report", "Channel", "Bill date", "#Bill rows", ...reconClasses.map((c) => "#" + c), "#Unexplained", "Finished"].map((h) =>
      // The class names break at their underscores, so that nine columns fit.
      el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, "").replace(/_/g, " "))))),
    el("tbody", {}, res.reconciliations.map((r) => el("tr", { dataset: { recon: String(r.id), unexplained: String(r.unexplained) } },
      el("td", {}, el("a", { href: "#recon=" + r.id, onclick: (e) => { e.preventDefault(); showReconciliation(r.id); } }, "#" + r.id)),
      el("td", {}, r.channel), el("td", {}, r.date), el("td", { class: "num" }, r.bill_rows),
      reconClasses.map((c) => el("td", { class: "num", dataset: { class: c } }, (r.counts && r.counts[c]) || 0)),
      el("td", { class: "num" }, r.unexplained ? el("strong", { class: "no" }, r.unexplained) : "0"),
      el("td", {}, fmtTime(r.finished_at)))))));
}

// showReconciliation reads one report and shows its figures and every item that is not a
// plain match, unexplained ones first: those are what an operator must look at.
async function showReconciliation(id) {
  const box = $("#recon-report");
  let r;
  try {
    r = await admin("/admin/reconciliations/" + encodeURIComponent(id));
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  renderReconciliation(r);
}

function renderReconciliation(r) {
  const items = r.items || [];
  const differences = items.filter((it) => it.class !== "MATCHED").sort((a, b) => Number(a.explained) - Number(b.explained));
  const row = (it) => el("tr", { dataset: { class: it.class, explained: String(it.explained) } },
    el("td", {}, badge(it.class)), el("td", {}, it.explained ? (it.resolution || "") : el("strong", { class: "no" }, "UNEXPLAINED")),
    el("td", {}, it.kind), el("td", {}, it.out_trade_no, it.out_refund_no ? el("div", { class: "muted" }, it.out_refund_no) : ""),
    el("td", { class: "num" }, it.in_bill || it.bill_amount ? money(it.bill_amount) : "–"), el("td", { class: "num" }, it.local_amount ? money(it.local_amount) : "–"),
    el("td", { class: "muted" }, it.detail || ""));
  const head = el("thead", {}, el("tr", {}, ["Class", "Resolution", "Kind", "Trade / refund", "#Bill", "#Ours", "Detail"].map((h) =>
    el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, "")))));
  const matched = items.filter((it) => it.class === "MATCHED");
  $("#recon-report").replaceChildren(
    el("h2", { id: "recon-title", dataset: { recon: String(r.id) } }, "Report #" + r.id + ": " + r.channel + " bill of " + r.date),
    el("div", { class: "card kv" },
      el("span", { class: "muted" }, "Bill rows"), el("span", {}, String(r.bill_rows)),
      reconClasses.flatMap((c) => [el("span", { class: "muted" }, c), el("span", { dataset: { count: c } }, String((r.counts && r.counts[c]) || 0))]),
      el("span", { class: "muted" }, "Unexplained"), el("span", { id: "recon-unexplained" }, r.unexplained ? el("strong", { class: "no" }, String(r.unexplained)) : el("span", { class: "yes" }, "0")),
      el("span", { class: "muted" }, "Ran"), el("span", {}, fmtTime(r.started_at) + " – " + fmtTime(r.finished_at))),
    el("h2", {}, "Differences"),
    differences.length === 0 ? el("p", { class: "muted", id: "recon-no-differences" }, "none: every row of the bill and every record of ours agree")
      : el("table", { id: "recon-items" }, head, el("tbody", {}, differences.map(row))),
    matched.length > 0 ? el("details", {}, el("summary", {}, matched.length + " matched"),
      el("table", {}, head.cloneNode(true), el("tbody", {}, matched.map(row)))) : "");
}

async function runReconciliation(ev) {
  ev.preventDefault();
  const button = $("#recon-run");
  button.disabled = true;
  $("#recon-error").textContent = "";
  try {
    const r = await admin("/admin/reconciliations", { method: "POST", body: { channel: $("#recon-channel").value, date: $("#recon-date").value } });
    renderReconciliation(r);
    await loadReconciliations();
  } catch (e) {
    $("#recon-error").textContent = e.message;
  } finally {
    button.disabled = false;
  }
}

// bars draws a horizontal bar chart as inline SVG.
function bars(title, items) {
  const rowH = 22, labelW = 150, w = 420, max = Math.max(1, ...items.map((i) => i.count));
  const svg = el("svg:svg", { width: w, height: items.length * rowH + 8, viewBox: "0 0 " + w + " " + (items.length * rowH + 8), role: "img", "aria-label": title });
  items.forEach((it, i) => {
    const y = i * rowH + 4, bw = Math.round((w - labelW - 50) * it.count / max);
    svg.append(el("svg:text", { x: 0, y: y + 14 }, it.label),
      el("svg:rect", { x: labelW, y, width: Math.max(bw, it.count ? 2 : 0), height: rowH - 6, rx: 3, fill: it.color || "#1760d6" }),
      el("svg:text", { x: labelW + bw + 6, y: y + 14 }, String(it.count)));
  });
  return [el("h2", {}, title), svg];
}

async function loadCharts() {
  const c = await admin("/admin/charts?hours=24");
  const conv = c.convergence;
  const sec = (v) => (v === null || v === undefined ? "–" : v.toFixed(2) + " s");
  $("#chart-latency").replaceChildren(...bars("Convergence latency (attempt created → paid), last 24 h", conv.buckets.map((b) => ({ label: b.label, count: b.count }))),
    el("p", { class: "muted" }, conv.samples + " paid attempts; p50 " + sec(conv.p50_seconds) + ", p99 " + sec(conv.p99_seconds)));
  const colors = { applied: "#137a3d", ignored: "#667085", rejected: "#b42318", failed: "#a15c07" };
  $("#chart-notify").replaceChildren(...bars("Notification outcomes, last 24 h", c.notifications.map((n) =>
    ({ label: (n.verified ? "verified, " : "unverified, ") + n.result, count: n.count, color: colors[n.result] }))));
  if (c.notifications.length === 0) $("#chart-notify").append(el("p", { class: "muted" }, "no notifications yet"));
}

document.addEventListener("DOMContentLoaded", () => {
  $("#top").replaceWith(el("header", {}, el("span", { class: "brand" }, "orderpay operations"),
    el("span", { class: "who" }, el("button", { class: "secondary", id: "logout", onclick: () => { sessionStorage.removeItem(TOKEN); showLogin(); } }, "Sign out"))));
  $("#tabs").append(...tabs.map(([n, label]) => el("button", { class: "secondary", id: "tabbtn-" + n, onclick: () => showTab(n) }, label)));
  $("#login-form").addEventListener("submit", login);
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); search($("#q").value.trim()); });
  $("#recon-form").addEventListener("submit", runReconciliation);
  showTab("orders");
  if (sessionStorage.getItem(TOKEN)) showConsole(); else showLogin();
});
