// The operations console. The operator's token stays in this tab's sessionStorage and goes
// out only as an Authorization header to /admin/*, never in a URL. GET /admin/session says
// who the token is and what their role allows; the console builds an action only when the
// role allows it, so a viewer's page holds no button or form that writes. The API checks the
// role again on every write (403 EFORBIDDEN) and writes each one to the audit log.
"use strict";

// durationText shows seconds as the console's English does: "11d 23:59:05", "02:03:04".
function durationText(secs) {
  const n = Math.max(0, Math.floor(Number(secs) || 0));
  const d = Math.floor(n / 86400), h = Math.floor(n % 86400 / 3600), m = Math.floor(n % 3600 / 60), sec = n % 60;
  const pad = (v) => String(v).padStart(2, "0");
  return (d > 0 ? d + "d " : "") + pad(h) + ":" + pad(m) + ":" + pad(sec);
}

const TOKEN = "orderpay.adminToken";

// The tabs, with the role a tab needs to be shown at all (most are for every role).
const tabs = [["orders", "Orders"], ["queue", "Refunds needing action"], ["aftersales", "After-sales"], ["webhooks", "Webhooks"],
  ["pending", "Pending queries"], ["stuck", "Stuck payments"], ["refunds", "Auto refunds"], ["recon", "Reconciliation"],
  ["audit", "Audit log"], ["charts", "Charts"], ["catalogue", "Catalogue", "admin"]];

// me is GET /admin/session: {name, actor, role, may: {viewer, operator, admin}}.
let me = null;

function may(role) { return Boolean(me && me.may && me.may[role]); }

async function admin(path, opts = {}) {
  try {
    return await api(path, Object.assign({}, opts, { headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN) } }));
  } catch (e) {
    if (e.status === 401) { sessionStorage.removeItem(TOKEN); showLogin("The token was refused."); }
    throw e;
  }
}

function showLogin(msg) {
  me = null;
  renderHeader();
  $("#console").classList.add("hidden");
  $("#login").classList.remove("hidden");
  $("#login-error").textContent = msg || "";
}

async function login(ev) {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN, $("#token").value);
  $("#token").value = "";
  try {
    me = await admin("/admin/session");
  } catch (e) {
    if (e.status !== 401) $("#login-error").textContent = e.message;
    return;
  }
  showConsole();
}

function signOut() {
  sessionStorage.removeItem(TOKEN);
  // A fresh page: nothing the last operator saw, or could do, stays in the DOM.
  location.hash = "";
  location.reload();
}

// renderHeader shows who is signed in, and Sign out, only while someone is.
function renderHeader() {
  const who = me ? [el("span", { id: "who-actor" }, me.actor), " ", el("span", { class: "role " + me.role, id: "who-role", dataset: { role: me.role } }, me.role),
    el("button", { class: "secondary", id: "logout", onclick: signOut }, "Sign out")] : el("span", {}, "not signed in");
  $("#top").replaceChildren(el("header", {}, el("span", { class: "brand" }, "orderpay operations"), el("span", { class: "who", id: "who" }, who)));
}

function showConsole() {
  renderHeader();
  $("#login").classList.add("hidden");
  $("#console").classList.remove("hidden");
  $("#tabs").replaceChildren(...tabs.filter(([, , role]) => !role || may(role)).map(([n, label]) =>
    el("button", { class: "secondary", id: "tabbtn-" + n, onclick: () => showTab(n) }, label)));
  $("#recon-run-box").replaceChildren(...(reconForm() || []));
  showTab("orders");
  const no = new URLSearchParams(location.hash.slice(1)).get("order");
  search(no || "");
  if (no) timeline(no);
}

function showTab(name) {
  for (const [n, , role] of tabs) {
    $("#tab-" + n).classList.toggle("hidden", n !== name);
    if (!role || may(role)) $("#tabbtn-" + n).classList.toggle("active", n === name);
  }
  $("#error").textContent = "";
  resent = null;
  const loaders = { queue: loadQueue, aftersales: loadAfterSales, webhooks: loadWebhooks, pending: loadPending, stuck: loadStuck, refunds: loadRefunds,
    recon: loadReconciliations, audit: loadAudit, charts: loadCharts, catalogue: loadCatalogue };
  if (loaders[name]) loaders[name]().catch((e) => { $("#error").textContent = e.message; });
}

// table draws rows under headers ("#" marks a number column), in a wrapper that scrolls
// sideways on a narrow screen; attrsOf(i), if given, sets the attributes of row i, and
// classes, if given, the class of each column's cells.
function table(headers, rows, empty, attrsOf, classes) {
  if (rows.length === 0) return el("p", { class: "muted" }, empty || "none");
  const classOf = (j) => [headers[j].startsWith("#") ? "num" : "", classes ? classes[j] : ""].filter(Boolean).join(" ");
  return el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, ""))))),
    el("tbody", {}, rows.map((r, i) => el("tr", attrsOf ? attrsOf(i) : {}, r.map((c, j) => el("td", { class: classOf(j) }, c)))))));
}

function badge(s) { return el("span", { class: "status " + s }, s); }

function orderLink(no) {
  return el("a", { href: "#order=" + encodeURIComponent(no), dataset: { order: no }, onclick: (e) => { e.preventDefault(); openOrder(no); } }, no);
}

// openOrder shows an order's timeline, from any tab.
function openOrder(no) {
  history.replaceState(null, "", "#order=" + encodeURIComponent(no));
  showTab("orders");
  timeline(no);
}

// waited says how long, from seconds.
function waited(s) {
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

// ---- actions ----

function field(name, placeholder, attrs) {
  return el("input", Object.assign({ name, placeholder, "aria-label": placeholder }, attrs || {}));
}

function choice(name, label, options) {
  return el("select", { name, "aria-label": label }, options.map(([v, text]) => el("option", { value: v }, text)));
}

// action is the form of one operator job: its fields, its button and a line for the API's
// error next to them. It is built only when the signed-in role allows the job (role): null
// otherwise, which el() leaves out. run gets the form's values and calls the API; done gets
// the answer and refreshes what the job changed. On an error nothing is refreshed and the
// message stays by the form.
function action(role, name, label, fields, run, done, opts = {}) {
  if (!may(role)) return null;
  const error = el("span", { class: "error", dataset: { error: name } });
  const button = el("button", { type: "submit", class: opts.button || "" }, label);
  const form = el("form", { class: "action row", dataset: Object.assign({ action: name }, opts.data || {}) }, fields, button, error);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    button.disabled = true;
    const values = Object.fromEntries(new FormData(form));
    let res;
    try {
      res = await run(values);
    } catch (e) {
      error.textContent = e.message;
      button.disabled = false;
      return;
    }
    try {
      await done(res);
    } catch (e) {
      $("#error").textContent = e.message;
    }
    button.disabled = false;
  });
  return form;
}

function post(path, body) {
  return admin(path, { method: "POST", body: body === undefined ? {} : body });
}

const enc = encodeURIComponent;

// ---- orders and their timeline ----

async function search(q) {
  $("#error").textContent = "";
  // data-q names the search the table shows, once it shows it.
  delete $("#order-results").dataset.q;
  try {
    const res = await admin("/admin/orders?q=" + enc(q));
    $("#order-results tbody").replaceChildren(...res.orders.map((o) => el("tr", {},
      el("td", {}, orderLink(o.order_no)), el("td", {}, o.buyer_id), el("td", {}, badge(o.status)),
      el("td", { class: "num" }, money(o.payable)), el("td", {}, fmtTime(o.created_at)))));
    if (res.orders.length === 0) $("#order-results tbody").append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "no orders match")));
    $("#order-results").dataset.q = q;
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
    case "operator":
      // An operator's write about this order, from the audit log: who, which call, on
      // what, and how it ended (ok, or the API's error code).
      return el("div", {}, el("strong", { class: "actor" }, ev.actor), " ", el("code", {}, ev.event), ev.reason ? " " + ev.reason : "", " → ",
        el("strong", { class: ev.result === "ok" ? "yes" : "no", dataset: { result: ev.result } }, ev.result), ev.detail ? el("div", { class: "muted" }, ev.detail) : "");
    default:
      return el("div", {}, ev.entity + " " + ev.entity_no + ": " + (ev.from ? ev.from + " → " : "created "), el("strong", {}, ev.to), " (" + ev.event + ", by " + ev.actor + ")",
        ev.reason ? el("div", { class: "muted" }, ev.reason) : "", rawBlock(ev.raw));
  }
}

// confirmed is the last "confirm by hand" answer, shown with its payment until another order
// is opened.
let confirmed = null;

async function timeline(no) {
  const box = $("#timeline");
  if (box.dataset.order !== no) confirmed = null;
  box.dataset.order = no;
  // data-shown names the order the view shows, once it is drawn (also after a reload).
  delete box.dataset.shown;
  if (!box.firstChild) box.replaceChildren(el("p", { class: "muted" }, "loading…"));
  let t;
  try {
    t = await admin("/admin/orders/" + enc(no) + "/timeline");
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  const refresh = () => timeline(no);
  const p = t.payment;
  box.replaceChildren(
    el("div", { class: "row" }, el("h2", { id: "timeline-title" }, "Timeline of order " + t.order.order_no),
      el("button", { class: "secondary", id: "timeline-reload", onclick: refresh }, "Reload")),
    el("div", { class: "card kv", id: "order-summary" },
      el("span", { class: "muted" }, "Order"), el("span", { id: "order-status", dataset: { status: t.order.status } }, badge(t.order.status), " " + money(t.order.payable) + ", buyer " + t.order.buyer_id),
      el("span", { class: "muted" }, "Payment"), el("span", { id: "payment-status", dataset: { status: p ? p.status : "" } },
        p ? [p.payment_no + " ", badge(p.status), " refunded " + money(p.refunded)] : "none yet",
        p && p.status !== "SUCCESS" ? action("operator", "confirm-payment", "Confirm payment by hand", [], () => post("/admin/payments/" + enc(p.payment_no) + "/confirm"),
          (res) => { confirmed = res; return refresh(); }, { button: "secondary", data: { payment: p.payment_no } }) : null),
      p && p.status !== "SUCCESS" && may("operator") ? [el("span", {}), el("span", { class: "muted" }, "Asks the channel about every attempt; only its verified answer marks anything paid.")] : ""),
    confirmed && p && confirmed.payment.payment_no === p.payment_no ? confirmResult(confirmed) : "",
    el("h2", {}, "Parcels"),
    el("div", { id: "tl-shipments" }, (t.shipments || []).length ? t.shipments.map((s) => parcelCard(s, refresh)) : el("p", { class: "muted" }, "none")),
    el("h2", {}, "After-sales"),
    el("div", { id: "tl-aftersales" }, (t.after_sales || []).length ? t.after_sales.map((a) => afterSaleCard(a, refresh)) : el("p", { class: "muted" }, "none")),
    el("h2", {}, "Attempts"),
    table(["out_trade_no", "Channel", "Status", "#Amount", "Created", "Paid"], t.attempts.map((a) =>
      [a.out_trade_no, a.channel, [badge(a.status), a.unknown ? " unknown" : ""], money(a.amount), fmtTime(a.created_at), fmtTime(a.paid_at)])),
    el("h2", {}, "Refunds"),
    el("div", { id: "tl-refunds" }, t.refunds.length ? t.refunds.map((r) => refundCard(r, refresh)) : el("p", { class: "muted" }, "none")),
    el("h2", {}, "Events"),
    el("div", { class: "scroll" }, el("table", { id: "events" }, el("tbody", {}, t.events.map((ev) => el("tr", { dataset: { kind: ev.kind } },
      el("td", {}, fmtTime(ev.at)), el("td", {}, el("span", { class: "kind " + ev.kind }, ev.kind)), el("td", {}, describe(ev))))))));
  box.dataset.shown = t.order.order_no;
  // The search's row of this order follows what its timeline says now.
  const link = document.querySelector('#order-results a[data-order="' + CSS.escape(no) + '"]');
  if (link) link.closest("tr").children[2].replaceChildren(badge(t.order.status));
}

// confirmResult shows what the channel said about each attempt when the payment was
// confirmed by hand: the attempt's status before, the channel's answer, and after.
function confirmResult(c) {
  return el("div", { class: "card", id: "confirm-result", dataset: { payment: c.payment.payment_no, status: c.payment.status } },
    el("strong", {}, "The channel's answer"), " — payment " + c.payment.payment_no + " is now ", badge(c.payment.status),
    table(["Attempt", "Channel", "Before", "Channel says", "After", "Detail"], c.attempts.map((a) =>
      [a.out_trade_no, a.channel, badge(a.before), el("strong", { dataset: { channelSays: a.channel_says || "" } }, a.channel_says || "not asked"),
        el("span", { dataset: { after: a.after } }, badge(a.after)), el("span", { class: "muted" }, a.detail || "")]),
    "no attempts", (i) => ({ dataset: { attempt: c.attempts[i].out_trade_no } })));
}

function items(list) {
  return (list || []).map((it) => it.sku + " × " + it.qty + (it.refunded ? " (" + it.refunded + " refunded)" : "")).join(", ");
}

// parcelCard is one parcel: ship it while PENDING, extend its receipt while SHIPPED.
function parcelCard(s, refresh) {
  const url = "/admin/shipments/" + enc(s.shipment_no);
  return el("div", { class: "card op-item", dataset: { shipment: s.shipment_no, status: s.status } },
    el("div", { class: "row" }, el("strong", {}, "Parcel " + s.shipment_no), badge(s.status),
      el("span", { class: "muted" }, "merchant " + s.merchant_id + ", warehouse " + s.warehouse + ", " + s.weight_g + " g")),
    el("div", {}, items(s.items)),
    s.carrier ? el("div", { class: "tracking" }, s.carrier + " " + s.tracking_no + ", shipped " + fmtTime(s.shipped_at)) : "",
    s.status === "SHIPPED" ? el("div", { class: "receipt", dataset: { extensions: String(s.extensions) } }, "to be received by " + fmtTime(s.receive_by) +
      " (" + durationText(s.receipt_remaining_seconds) + " left); extended " + s.extensions + " time" + (s.extensions === 1 ? "" : "s") + (s.buyer_extended ? ", and once by the buyer" : "")) : "",
    s.received_at ? el("div", {}, "received " + fmtTime(s.received_at) + " (" + s.received_by + ")") : "",
    s.status === "PENDING" ? action("operator", "ship", "Ship", [field("carrier", "carrier", { required: true }), field("tracking_no", "tracking number", { required: true })],
      (v) => post(url + "/ship", { carrier: v.carrier, tracking_no: v.tracking_no }), refresh) : null,
    s.status === "SHIPPED" ? action("operator", "extend", "Extend receipt", [choice("by", "extended by", [["merchant", "by the merchant"], ["platform", "by the platform"]]),
      field("days", "days", { type: "number", min: 1, max: 30, value: "3", required: true }), el("span", {}, "days")],
    (v) => post(url + "/extend", { by: v.by, days: Number(v.days) }), refresh, { button: "secondary" }) : null);
}

// afterSaleCard is one after-sales request: approve or reject it while REQUESTED, receive the
// goods of a return while AWAITING_GOODS. withOrder links its order (in the review tab).
function afterSaleCard(a, refresh, withOrder) {
  const url = "/admin/after-sales/" + enc(a.after_sale_no);
  return el("div", { class: "card op-item", dataset: { afterSale: a.after_sale_no, status: a.status } },
    el("div", { class: "row" }, el("strong", {}, (a.kind === "return" ? "Return " : "Refund ") + a.after_sale_no), badge(a.status),
      el("span", {}, money(a.amount)), withOrder ? el("span", {}, "order ", orderLink(a.order_no)) : "",
      a.auto_review ? el("span", { class: "muted" }, "approved by the rule") : ""),
    el("div", {}, items(a.items), a.reason ? el("span", { class: "muted" }, " — “" + a.reason + "”") : ""),
    a.return_tracking_no ? el("div", { class: "tracking" }, "sent back: " + a.return_carrier + " " + a.return_tracking_no) : "",
    a.status === "AWAITING_GOODS" && !a.return_tracking_no ? el("div", { class: "muted" }, "the buyer has not sent the goods back yet") : "",
    a.refunded_at ? el("div", {}, "refunded " + fmtTime(a.refunded_at)) : "",
    a.status === "REQUESTED" ? el("div", { class: "row" },
      action("operator", "approve", "Approve", [], () => post(url + "/approve"), refresh),
      action("operator", "reject", "Reject", [field("reason", "reason for the buyer", { required: true })], (v) => post(url + "/reject", { reason: v.reason }), refresh, { button: "danger" })) : null,
    a.status === "AWAITING_GOODS" ? action("operator", "receive-goods", "Goods received: restock and refund", [], () => post(url + "/receive-goods"), refresh) : null);
}

// refundCard is one channel refund: retry or resolve one that needs action, or send one on its
// way now. queued refunds (the queue tab) show their order, buyer and how long they waited.
function refundCard(r, refresh, queued) {
  const url = "/admin/refunds/" + enc(r.out_refund_no);
  const open = r.status === "PENDING" || r.status === "PROCESSING";
  return el("div", { class: "card op-item", dataset: { refund: r.out_refund_no, status: r.status } },
    el("div", { class: "row" }, el("strong", {}, "Refund " + r.out_refund_no), badge(r.status), el("span", { class: "amount" }, money(r.amount)),
      el("span", { class: "muted" }, r.channel + ", " + r.reason)),
    queued ? el("div", {}, "order ", orderLink(r.order_no), ", buyer " + r.buyer_id + ", waiting ", el("strong", { class: "waiting" }, waited(r.waiting_seconds))) : "",
    r.problem ? el("div", { class: "problem" }, r.problem) : "",
    r.warning ? el("div", { class: "problem warning" }, "⚠ " + r.warning) : "",
    el("div", { class: "muted" }, "created " + fmtTime(r.created_at) + "; asked of the channel " + r.sends + " time" + (r.sends === 1 ? "" : "s") +
      (r.claimed_until ? " (a call on its way until " + fmtTime(r.claimed_until) + ")" : "") +
      (r.retried ? ", sent again " + r.retried + " after a refusal" : "") + (r.next_at ? "; next " + fmtTime(r.next_at) : "") +
      (r.refunded_at ? "; refunded " + fmtTime(r.refunded_at) : "")),
    r.resolved_by ? el("div", { class: "resolution" }, "resolved by " + r.resolved_by + ", reference " + r.resolved_ref + (r.resolved_note ? " — " + r.resolved_note : "")) : "",
    r.status === "NEEDS_ACTION" ? el("div", { class: "row" },
      action("operator", "retry-refund", "Retry", [], () => post(url + "/retry"), refresh),
      action("operator", "resolve-refund", "Resolve: paid outside the channel", [field("reference", "reference (bank transfer…)", { required: true }), field("note", "note")],
        (v) => post(url + "/resolve", { reference: v.reference, note: v.note }), refresh, { button: "secondary" })) : null,
    open ? action("operator", "retry-refund", "Retry now", [], () => post(url + "/retry"), refresh, { button: "secondary" }) : null);
}

// ---- queues ----

// Each list says what it shows (data-shown: its filter) once it is drawn, and not while it
// loads.
async function loadQueue() {
  delete $("#queue").dataset.shown;
  const res = await admin("/admin/refunds/needs-action");
  $("#queue").replaceChildren(res.refunds.length ? el("div", {}, res.refunds.map((r) => refundCard(r, loadQueue, true)))
    : el("p", { class: "muted", id: "queue-empty" }, "Nothing waits: every refund is on its way or done."));
  $("#queue").dataset.shown = "all";
}

async function loadAfterSales() {
  const status = $("#aftersales-status").value;
  delete $("#aftersales").dataset.shown;
  const res = await admin("/admin/after-sales?status=" + enc(status));
  $("#aftersales").replaceChildren(res.refunds.length ? el("div", {}, res.refunds.map((a) => afterSaleCard(a, loadAfterSales, true)))
    : el("p", { class: "muted" }, "none"));
  $("#aftersales").dataset.shown = status;
}

// resent is the answer to the last resend: the delivery with every attempt, shown above the
// list until another tab is opened.
let resent = null;

function resendResult(d) {
  return el("div", { class: "card", id: "webhook-resent", dataset: { delivery: String(d.id), status: d.status } },
    el("strong", {}, "Delivery #" + d.id + " resent"), " (" + d.event + (d.order_no ? ", order " + d.order_no : "") + "): now ", badge(d.status),
    table(["Attempt", "Answer", "At"], d.history.map((a) => [a.kind, a.error || (a.http_status ? "HTTP " + a.http_status : ""), fmtTime(a.at)]),
      "no attempts", (i) => ({ dataset: { kind: d.history[i].kind } })));
}

async function loadWebhooks() {
  const box = $("#webhooks"), status = $("#webhooks-status").value;
  delete box.dataset.shown;
  let res;
  try {
    res = await admin("/admin/webhooks/deliveries?status=" + enc(status));
  } catch (e) {
    if (e.code !== "ENOTFOUND") throw e;
    box.replaceChildren(el("p", { class: "muted" }, e.message + " (serve --webhook-url)."));
    return;
  }
  box.replaceChildren(resent ? resendResult(resent) : "", table(["#Id", "Event", "Order", "Status", "#Attempts", "Last answer", "Delivered / next", ""], res.deliveries.map((d) =>
    [String(d.id), [d.event, el("div", { class: "muted subscriber" }, "to " + d.subscriber)], d.order_no ? orderLink(d.order_no) : "", badge(d.status),
      el("span", { dataset: { attempts: String(d.attempts) } }, String(d.attempts)), d.last_error || (d.last_http_status ? "HTTP " + d.last_http_status : ""),
      d.delivered_at ? fmtTime(d.delivered_at) : d.next_at ? "next " + fmtTime(d.next_at) : "",
      action("operator", "resend", "Resend", [], () => post("/admin/webhooks/deliveries/" + d.id + "/resend"), (res) => { resent = res; return loadWebhooks(); },
        { button: "secondary" })]),
  "no deliveries", (i) => ({ dataset: { delivery: String(res.deliveries[i].id), status: res.deliveries[i].status } })));
  box.dataset.shown = status || "all";
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

// ---- the audit log ----

async function loadAudit() {
  const actor = $("#audit-actor").value.trim(), order = $("#audit-order").value.trim();
  const q = new URLSearchParams();
  if (actor) q.set("actor", actor);
  if (order) q.set("order_no", order);
  delete $("#audit").dataset.shown;
  const res = await admin("/admin/audit?" + q);
  $("#audit").replaceChildren(table(["When", "Operator", "Role", "Call", "On", "Order", "Result"], res.actions.map((a) =>
    [fmtTime(a.at), el("span", { class: "actor" }, a.actor), a.role, el("code", {}, a.action), a.target || "", a.order_no ? orderLink(a.order_no) : "",
      a.code ? [el("strong", { class: "no" }, a.status + " " + a.code), a.detail ? el("span", { class: "muted detail", title: a.detail }, a.detail) : ""]
        : el("span", { class: "yes" }, String(a.status))]),
  "no actions", (i) => ({ dataset: { audit: String(res.actions[i].id), actor: res.actions[i].actor } }), ["when", "", "", "call", "target", "", "result"]));
  $("#audit").dataset.shown = actor + "/" + order;
}

// ---- the catalogue (admins) ----

// The product types and stock policies in words, for the list and the form alike.
const productTypes = [["normal", "normal (3 days to pay)"], ["special", "special offer (30 min to pay)"], ["fast", "fast-moving (15 min to pay)"]];
const stockPolicies = [["order", "stock locked at order"], ["payment", "deducted at payment"], ["reserve", "reserved for a while"]];

// wordFor is the words of value in pairs, or the value itself when it has none.
function wordFor(pairs, value) {
  const found = pairs.find(([v]) => v === value);
  return found ? found[1] : value;
}

// numbers turns the named form values into numbers, leaving out empty ones.
function numbers(v, names) {
  const out = {};
  for (const n of names) if (v[n] !== undefined && v[n] !== "") out[n] = Number(v[n]);
  return out;
}

// backupCount is one of a SKU's backup counts (docs/design.md §6.2), or a dash when it
// keeps no backup.
function backupCount(stock, n) { return stock.backup_units ? String(n) : "—"; }

function isoOrUndefined(local) { return local ? new Date(local).toISOString() : undefined; }

async function loadCatalogue() {
  const box = $("#catalogue");
  if (!may("admin")) { box.replaceChildren(); return; }
  const [skus, blocked] = await Promise.all([api("/v1/skus"), admin("/admin/blocklist")]);
  const fen = (name, placeholder) => field(name, placeholder, { type: "number", min: 0, required: true });
  const note = (id) => el("p", { class: "muted", id });
  box.replaceChildren(
    el("h2", {}, "SKUs"),
    table(["SKU", "Title", "Merchant", "#Price", "Type", "Stock policy", "#Available", "#Sold", "#Backup used", "#Backup left", "Warehouse"], skus.skus.map((s) =>
      [s.sku, s.title, s.merchant_id, money(s.price), wordFor(productTypes, s.product_type), wordFor(stockPolicies, s.stock_policy),
        String(s.stock.available), String(s.stock.sold), backupCount(s.stock, s.stock.backup_used), backupCount(s.stock, s.stock.backup_left), s.warehouse]),
    "no SKUs", (i) => ({ dataset: { sku: skus.skus[i].sku } })),
    el("div", { class: "card" }, el("strong", {}, "Add a SKU"), el("span", { class: "muted" }, " — prices in fen (2599 is ¥25.99)"),
      action("admin", "add-sku", "Add SKU", [field("sku", "sku", { required: true }), field("title", "title", { required: true }),
        field("merchant_id", "merchant id", { required: true }), fen("price", "price, fen"), fen("stock", "stock"),
        field("backup_units", "backup units (payment, reserve)", { type: "number", min: 0, max: 10000000 }),
        choice("product_type", "product type", productTypes),
        choice("stock_policy", "stock policy", stockPolicies),
        field("reserve_minutes", "reserve minutes", { type: "number", min: 1 }), field("limit_per_buyer", "limit per buyer", { type: "number", min: 0 }),
        field("stock_buckets", "stock buckets", { type: "number", min: 1, max: 256 }), field("warehouse", "warehouse"),
        field("weight_g", "weight, g", { type: "number", min: 0 }), field("volume_cm3", "volume, cm³", { type: "number", min: 0 })],
      (v) => admin("/admin/skus", { method: "POST", body: Object.assign({ sku: v.sku, title: v.title, merchant_id: v.merchant_id, product_type: v.product_type,
        stock_policy: v.stock_policy, warehouse: v.warehouse || undefined }, numbers(v, ["price", "stock", "backup_units", "reserve_minutes", "limit_per_buyer", "stock_buckets", "weight_g", "volume_cm3"])) }),
      loadCatalogue)),
    el("h2", {}, "Coupons"),
    el("div", { class: "card" }, el("strong", {}, "New coupon template"), el("span", { class: "muted" }, " — amount off an order of at least the threshold, in fen"),
      action("admin", "create-coupon", "Create template", [field("code", "code", { required: true }), field("title", "title", { required: true }),
        fen("amount_off", "amount off, fen"), fen("threshold", "threshold, fen"),
        el("label", {}, "from ", el("input", { name: "valid_from", type: "datetime-local", "aria-label": "valid from" })),
        el("label", {}, "until ", el("input", { name: "valid_until", type: "datetime-local", "aria-label": "valid until" }))],
      (v) => admin("/admin/coupons", { method: "POST", body: Object.assign({ code: v.code, title: v.title, valid_from: isoOrUndefined(v.valid_from),
        valid_until: isoOrUndefined(v.valid_until) }, numbers(v, ["amount_off", "threshold"])) }),
      (t) => { $("#coupon-made").textContent = "Template " + t.code + ": " + money(t.amount_off) + " off from " + money(t.threshold) + "."; }),
      note("coupon-made")),
    el("div", { class: "card" }, el("strong", {}, "Issue a coupon to a buyer"),
      action("admin", "issue-coupon", "Issue", [field("code", "template code", { required: true }), field("buyer_id", "buyer id", { required: true })],
        (v) => admin("/admin/coupons/" + enc(v.code) + "/issue", { method: "POST", body: { buyer_id: v.buyer_id } }),
        (c) => { $("#coupon-issued").textContent = "Coupon " + c.id + " (" + c.code + ") issued to " + c.buyer_id + ": " + c.status + "."; }),
      note("coupon-issued")),
    el("h2", {}, "Blocklist"),
    el("p", { class: "muted" }, "Blocked buyers and devices (the app's X-Device-Id) cannot create orders."),
    table(["Kind", "Value", "Reason", "Since", ""], blocked.blocklist.map((b) => [b.kind, b.value, b.reason, fmtTime(b.created_at),
      action("admin", "unblock", "Remove", [], () => admin("/admin/blocklist/" + enc(b.kind) + "/" + enc(b.value), { method: "DELETE" }), loadCatalogue, { button: "danger" })]),
    "nobody is blocked", (i) => ({ dataset: { blocked: blocked.blocklist[i].kind + ":" + blocked.blocklist[i].value } })),
    el("div", { class: "card" }, el("strong", {}, "Block"),
      action("admin", "block", "Block", [choice("kind", "kind", [["buyer", "buyer"], ["device", "device"]]), field("value", "buyer or device id", { required: true }),
        field("reason", "reason", { required: true })],
      (v) => admin("/admin/blocklist/" + enc(v.kind) + "/" + enc(v.value), { method: "PUT", body: { reason: v.reason } }), loadCatalogue)));
}

// ---- reconciliation ----

// A report is one channel's bill of one day, checked in three layers: the trades (every row
// against our payments and refunds), the fees (each row's fee against the contract's, and the
// bill's totals), and the settlement (the merchant account's movements and balance against
// the trades). The page shows the three side by side, each with its figures, then every
// difference with its class, money and detail.

// reconForm picks a channel and a day: Show reads the newest report of it; an admin's form
// (#recon-form) also runs one now.
function reconForm() {
  const admin = may("admin");
  const form = el("form", { id: admin ? "recon-form" : "recon-pick", class: "row", dataset: admin ? { action: "reconcile" } : {} },
    el("select", { id: "recon-channel", "aria-label": "channel" }, el("option", { value: "alipay" }, "Alipay"), el("option", { value: "wechat" }, "WeChat Pay")),
    el("input", { id: "recon-date", type: "date", required: true, "aria-label": "bill date" }),
    el("button", { id: "recon-show", type: "button", class: "secondary", onclick: showReconciliationOf }, "Show"),
    admin ? el("button", { id: "recon-run" }, "Run reconciliation") : null);
  form.addEventListener("submit", admin ? runReconciliation : (e) => { e.preventDefault(); showReconciliationOf(); });
  return [form, el("p", { class: "error", id: "recon-error" })];
}

// The trades layer's five classes, always counted in its card and the list's first column.
const reconClasses = ["MATCHED", "MISSING_LOCAL", "MISSING_CHANNEL", "AMOUNT_MISMATCH", "REFUND_MISMATCH"];

// reconLayers are the three layers in order, with their words and their classes.
const reconLayers = [
  ["TRADES", "Trades", reconClasses],
  ["FEES", "Fees", ["FEE_MISMATCH", "FEE_RATE_CHANGED", "REFUND_FEE_NOT_RETURNED", "REFUND_FEE_RETURNED", "REFUND_FEE_MISMATCH", "FEE_SUMMARY_MISMATCH", "FEE_UNRECORDED", "NOT_CHECKED"]],
  ["SETTLEMENT", "Settlement", ["SETTLEMENT_MISSING", "SETTLEMENT_MISMATCH", "SETTLEMENT_UNKNOWN", "BALANCE_BREAK", "NOT_CHECKED"]],
];

// yesterdayInChina is the bill date a run can have today: bills are dated by China time.
function yesterdayInChina() {
  return new Date(Date.now() + 8 * 3600e3 - 86400e3).toISOString().slice(0, 10);
}

// layerState is what a layer came to: NOT_CHECKED (it could not be compared), UNEXPLAINED
// (an operator must look), EXPLAINED (differences, each repaired or explained) or MATCHED.
function layerState(sum, notChecked) {
  if (notChecked) return "NOT_CHECKED";
  if (sum.unexplained > 0) return "UNEXPLAINED";
  return sum.differences > 0 ? "EXPLAINED" : "MATCHED";
}

function layerSum(r, layer) { return (r.layers && r.layers[layer]) || { differences: 0, unexplained: 0, unexplained_amount: 0 }; }

async function loadReconciliations() {
  const date = $("#recon-date");
  if (date && !date.value) date.value = yesterdayInChina();
  const res = await admin("/admin/reconciliations");
  const list = $("#recon-list");
  if (res.reconciliations.length === 0) {
    list.replaceChildren(el("p", { class: "muted", id: "recon-empty" }, "No reports yet: the daily run writes one per channel" + (may("admin") ? ", or run one above." : ".")));
    return;
  }
  list.replaceChildren(el("div", { class: "scroll" }, el("table", { id: "recon-reports" },
    el("thead", {}, el("tr", {}, ["Report", "Channel", "Bill date", "Account", "#Bill rows", "#Matched", ...reconLayers.map(([, words]) => words), "#Unexplained", "Finished"].map((h) =>
      el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, ""))))),
    el("tbody", {}, res.reconciliations.map((r) => el("tr", { dataset: { recon: String(r.id), unexplained: String(r.unexplained) } },
      el("td", {}, el("a", { href: "#recon=" + r.id, onclick: (e) => { e.preventDefault(); showReconciliation(r.id); } }, "#" + r.id)),
      el("td", {}, r.channel), el("td", {}, r.date), el("td", {}, r.account || "–"), el("td", { class: "num" }, r.bill_rows),
      el("td", { class: "num", dataset: { class: "MATCHED" } }, (r.counts && r.counts.MATCHED) || 0),
      reconLayers.map(([layer]) => {
        const sum = layerSum(r, layer);
        const state = layerState(sum, false);
        return el("td", { dataset: { layer, state } }, sum.unexplained > 0 ? el("strong", { class: "no" }, sum.unexplained + " · " + money(sum.unexplained_amount))
          : el("span", { class: "yes" }, state === "EXPLAINED" ? "explained" : "✓"));
      }),
      el("td", { class: "num" }, r.unexplained ? el("strong", { class: "no" }, r.unexplained) : "0"),
      el("td", {}, fmtTime(r.finished_at))))))));
}

// showReconciliationOf shows the newest report of the channel and day the form names.
async function showReconciliationOf() {
  const channel = $("#recon-channel").value, date = $("#recon-date").value;
  $("#recon-error").textContent = "";
  try {
    const res = await admin("/admin/reconciliations?channel=" + enc(channel) + "&date=" + enc(date));
    if (res.reconciliations.length === 0) {
      $("#recon-report").replaceChildren(el("p", { class: "muted", id: "recon-none" }, "No report of the " + channelName(channel) + " bill of " + date + " yet" +
        (may("admin") ? ": run one." : ".")));
      return;
    }
    await showReconciliation(res.reconciliations[0].id);
  } catch (e) {
    $("#recon-error").textContent = e.message;
  }
}

// showReconciliation reads one report and shows it.
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

// kvRows are a card's name and value pairs; a value of null is left out.
function kvRows(pairs) {
  return pairs.filter(([, v]) => v !== null).flatMap(([name, v, key]) => [el("span", { class: "muted" }, name), el("span", { dataset: key ? { figure: key } : {} }, v)]);
}

// layerCard is one layer of a report: what it came to, its differences, the money nothing
// explains, its classes' counts and the figures it compared.
function layerCard(r, layer, words, classes) {
  const items = (r.items || []).filter((it) => it.layer === layer);
  const notChecked = items.find((it) => it.class === "NOT_CHECKED");
  const sum = layerSum(r, layer);
  const state = layerState(sum, Boolean(notChecked));
  const f = r.figures || {};
  const yuan = (checked, v) => (checked ? money(v) : "–");
  const figures = {
    TRADES: [["Bill rows", String(r.bill_rows), "bill_rows"], ["Paid", f.fees_checked ? money(f.paid) : null, "paid"], ["Refunded", f.fees_checked ? money(f.refunded) : null, "refunded"]],
    FEES: [["Fees expected", yuan(f.fees_checked, f.fee_expected), "fee_expected"], ["Fees in the bill", yuan(f.fees_checked, f.fee_bill), "fee_bill"],
      ["Bill's fee total", yuan(f.fees_checked, f.fee_summary), "fee_summary"]],
    SETTLEMENT: [["Net expected", yuan(f.settlement_checked, f.net_expected), "net_expected"], ["Net to the account", yuan(f.settlement_checked, f.net_bill), "net_bill"],
      ["Movements", f.settlement_checked ? String(f.movements) : "–", "movements"], ["Opening balance", yuan(f.balance_known, f.opening), "opening"],
      ["Closing balance", yuan(f.balance_known, f.closing), "closing"],
      ["Previous close" + (f.prev_known ? " (" + f.prev_date + ")" : ""), yuan(f.prev_known, f.prev_closing), "prev_closing"]],
  }[layer];
  // The layer's own items are counted: NOT_CHECKED may be in more than one layer.
  const count = (c) => items.filter((it) => it.class === c).length;
  const counts = classes.filter((c) => reconClasses.includes(c) || count(c) > 0);
  return el("div", { class: "card recon-layer", id: "recon-layer-" + layer.toLowerCase(), dataset: { layer, state } },
    el("div", { class: "row" }, el("h3", {}, words), el("span", { class: "status " + state, dataset: { state } }, state.replace("_", " "))),
    notChecked ? el("p", { class: "muted not-checked" }, notChecked.detail) : "",
    el("div", { class: "kv" }, kvRows([
      ["Differences", String(sum.differences), "differences"],
      ["Unexplained", sum.unexplained ? el("strong", { class: "no" }, String(sum.unexplained)) : el("span", { class: "yes" }, "0"), "unexplained"],
      ["Unexplained amount", sum.unexplained_amount ? el("strong", { class: "no" }, money(sum.unexplained_amount)) : money(0), "unexplained_amount"],
    ])),
    el("div", { class: "kv counts" }, counts.flatMap((c) => [el("span", { class: "muted" }, c.replace(/_/g, " ").toLowerCase()),
      el("span", { dataset: { count: c } }, String(count(c)))])),
    el("div", { class: "kv figures" }, kvRows(figures)));
}

// tradeCell is an item's trade, linked to its order's page in the console when it is a shop
// order's, and its refund number under it.
function tradeCell(it) {
  const trade = it.order_no ? el("a", { href: "#order=" + enc(it.order_no), class: "trade", dataset: { order: it.order_no, trade: it.out_trade_no },
    onclick: (e) => { e.preventDefault(); openOrder(it.order_no); } }, it.out_trade_no) : el("span", { class: "trade" }, it.out_trade_no || "–");
  return [trade, it.out_refund_no ? el("div", { class: "muted" }, it.out_refund_no) : ""];
}

function renderReconciliation(r) {
  const items = r.items || [];
  const layerIndex = (it) => reconLayers.findIndex(([l]) => l === it.layer);
  // Unexplained first, then by layer: those are what an operator must look at.
  const differences = items.filter((it) => it.class !== "MATCHED").sort((a, b) => Number(a.explained) - Number(b.explained) || layerIndex(a) - layerIndex(b));
  const amount = (v, has) => (has ? money(v) : "–");
  const row = (it) => el("tr", { dataset: { class: it.class, layer: it.layer, explained: String(it.explained) } },
    el("td", {}, it.layer), el("td", {}, badge(it.class)), el("td", {}, it.explained ? (it.resolution || "") : el("strong", { class: "no" }, "UNEXPLAINED")),
    el("td", {}, it.kind || ""), el("td", {}, tradeCell(it)),
    el("td", { class: "num" }, amount(it.bill_amount, it.class !== "NOT_CHECKED" && it.class !== "MISSING_CHANNEL")),
    el("td", { class: "num" }, amount(it.local_amount, it.class !== "NOT_CHECKED" && it.class !== "MISSING_LOCAL")),
    el("td", { class: "num difference" }, it.difference ? el("strong", { class: it.explained ? "" : "no" }, money(it.difference)) : "–"),
    el("td", { class: "muted detail" }, it.detail || ""));
  const head = el("thead", {}, el("tr", {}, ["Layer", "Class", "Resolution", "Kind", "Trade / refund", "#Bill", "#Ours", "#Difference", "Detail"].map((h) =>
    el("th", { class: h.startsWith("#") ? "num" : "" }, h.replace(/^#/, "")))));
  const matched = items.filter((it) => it.class === "MATCHED");
  const exportLink = el("a", { id: "recon-export", class: "button secondary", href: "/admin/reconciliations/" + enc(r.id) + "/export.csv",
    onclick: (e) => { e.preventDefault(); exportReconciliation(r); } }, "Export CSV");
  $("#recon-report").replaceChildren(
    el("h2", { id: "recon-title", dataset: { recon: String(r.id) } }, "Report #" + r.id + ": " + r.channel + " bill of " + r.date),
    el("div", { class: "row recon-meta" }, el("span", { class: "muted" }, "Account"), el("span", { id: "recon-account" }, r.account || "–"),
      el("span", { class: "muted" }, "Unexplained"),
      el("span", { id: "recon-unexplained" }, r.unexplained ? el("strong", { class: "no" }, String(r.unexplained)) : el("span", { class: "yes" }, "0")),
      el("span", { class: "muted" }, "ran " + fmtTime(r.started_at) + " – " + fmtTime(r.finished_at)), exportLink),
    el("div", { class: "recon-layers", id: "recon-layers" }, reconLayers.map(([layer, words, classes]) => layerCard(r, layer, words, classes))),
    el("h2", {}, "Differences"),
    differences.length === 0 ? el("p", { class: "muted", id: "recon-no-differences" }, "none: every row of the bill, every fee and every movement of the account agree with our records")
      : el("div", { class: "scroll" }, el("table", { id: "recon-items" }, head, el("tbody", {}, differences.map(row)))),
    matched.length > 0 ? el("details", {}, el("summary", {}, matched.length + " matched"),
      el("div", { class: "scroll" }, el("table", {}, head.cloneNode(true), el("tbody", {}, matched.map(row))))) : "");
}

// exportReconciliation downloads a report's CSV. The token goes only in the Authorization
// header, so the file is fetched here and handed to the browser as a download.
async function exportReconciliation(r) {
  $("#recon-error").textContent = "";
  try {
    const res = await fetch("/admin/reconciliations/" + enc(r.id) + "/export.csv", { headers: { Authorization: "Bearer " + sessionStorage.getItem(TOKEN) } });
    if (!res.ok) {
      let msg = res.status + " " + res.statusText;
      try { msg = (await res.json()).error.message; } catch (e) { /* not JSON: the status says it */ }
      throw new Error(msg);
    }
    const url = URL.createObjectURL(await res.blob());
    const a = el("a", { href: url, download: "reconciliation-" + r.channel + "-" + r.date + "-" + r.id + ".csv", class: "hidden" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    $("#recon-error").textContent = e.message;
  }
}

async function runReconciliation(ev) {
  ev.preventDefault();
  const button = $("#recon-run");
  if (!button) return;
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
    el("p", { class: "muted" }, conv.samples + " paid attempts; p50 ≤ " + sec(conv.p50_seconds) + ", p99 ≤ " + sec(conv.p99_seconds)));
  const colors = { applied: "#137a3d", ignored: "#667085", rejected: "#b42318", failed: "#a15c07" };
  $("#chart-notify").replaceChildren(...bars("Notification outcomes, last 24 h", c.notifications.map((n) =>
    ({ label: (n.verified ? "verified, " : "unverified, ") + n.result, count: n.count, color: colors[n.result] }))));
  if (c.notifications.length === 0) $("#chart-notify").append(el("p", { class: "muted" }, "no notifications yet"));
}

function failed(e) { $("#error").textContent = e.message; }

document.addEventListener("DOMContentLoaded", async () => {
  renderHeader();
  $("#login-form").addEventListener("submit", login);
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); search($("#q").value.trim()); });
  for (const [form, load] of [["#aftersales-filter", loadAfterSales], ["#webhooks-filter", loadWebhooks], ["#audit-filter", loadAudit]]) {
    $(form).addEventListener("submit", (e) => { e.preventDefault(); $("#error").textContent = ""; load().catch(failed); });
  }
  if (!sessionStorage.getItem(TOKEN)) { showLogin(); return; }
  try {
    me = await admin("/admin/session");
  } catch (e) {
    if (e.status !== 401) showLogin(e.message);
    return;
  }
  showConsole();
});
