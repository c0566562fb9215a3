// One order, and what the buyer can do with it: pay or cancel it while unpaid; give or
// change the delivery address until the first parcel ships; confirm a parcel's receipt or
// extend it once; ask for a refund of units that have not shipped or a return of units
// that have, by line and quantity; send a return back; and follow each request until the
// money is back. The API decides: the page offers only what the order's JSON allows, and
// shows the API's own message when it refuses.
"use strict";

const orderNo = decodeURIComponent(location.pathname.split("/").pop());
const orderURL = "/v1/orders/" + encodeURIComponent(orderNo);

// RETURN_WINDOW_DAYS is how long after receipt a unit may be returned (the server's
// order.ReturnWindowDefault, seven days); the server checks it again.
const RETURN_WINDOW_DAYS = 7;
// While a request is under way the page reads the order again, often while the money is
// moving, less often while it waits for the merchant.
const FOLLOW_MOVING_MS = 2000, FOLLOW_WAITING_MS = 5000;

let order = null;     // the order as last read
let fetchedAt = 0;    // when, by this browser's clock
let shownKey = "";    // what of it is drawn, without the fields that only count down
let followTimer = null;

// Fields that change on every read without anything happening to the order.
const VOLATILE = new Set(["server_time", "remaining_seconds", "remaining", "receipt_remaining_seconds", "receipt_remaining"]);

async function load() {
  await loadSession();
  showHeader("");
  $("#order-no").textContent = orderNo;
  onLang(() => { if (order) draw(true); });
  await refresh();
  setInterval(tick, 1000);
}

// refresh reads the order and draws it if it changed; keep says whether what the buyer
// typed survives a redraw (not after their own request went through).
async function refresh(keep = true) {
  let o;
  try {
    o = await buyerRead(orderURL);
  } catch (e) {
    $("#error").textContent = e.message;
    if (e.status === 404) notFound();
    follow();
    return;
  }
  $("#error").textContent = "";
  document.querySelector("main").classList.remove("not-found");
  order = o;
  fetchedAt = Date.now();
  const key = JSON.stringify(o, (k, v) => (VOLATILE.has(k) ? undefined : v));
  if (key !== shownKey || !keep) {
    shownKey = key;
    draw(keep);
  }
  tick();
  follow();
}

// notFound shows an order the API does not find for this buyer (none, or another buyer's)
// as not found: its message, and nothing of an order, no form to change it.
function notFound() {
  order = null;
  shownKey = "";
  document.querySelector("main").classList.add("not-found");
  for (const id of ["summary", "address", "shipments", "aftersales", "ask"]) $("#" + id).replaceChildren();
  $("#items tbody").replaceChildren();
}

// follow reads the order again while one of its requests is under way.
function follow() {
  clearTimeout(followTimer);
  followTimer = null;
  const open = (order && order.refunds || []).filter((a) => a.status !== "SUCCESS" && a.status !== "REJECTED");
  if (open.length === 0) return;
  const moving = open.some((a) => ["APPROVED", "GOODS_RECEIVED", "REFUNDING"].includes(a.status));
  followTimer = setTimeout(refresh, moving ? FOLLOW_MOVING_MS : FOLLOW_WAITING_MS);
}

// serverNow is the server's clock now, from the last read.
function serverNow() { return Date.parse(order.server_time) + (Date.now() - fetchedAt); }

// tick writes every countdown on the page from the seconds the server said were left.
function tick() {
  if (!order) return;
  const gone = (Date.now() - fetchedAt) / 1000;
  for (const e of document.querySelectorAll("[data-left]")) {
    const left = Math.max(0, Math.floor(Number(e.dataset.left) - gone));
    e.textContent = countdown(left);
    e.dataset.seconds = left;
  }
}

// draw redraws the whole order; with keep, the values typed into its fields, and the focus,
// survive.
function draw(keep) {
  const saved = {};
  const focused = document.activeElement && document.activeElement.id;
  if (keep) for (const e of document.querySelectorAll("main input[id], main select[id], main textarea[id]")) saved[e.id] = e.value;
  const o = order;
  drawSummary(o);
  drawAddress(o);
  $("#items tbody").replaceChildren(...o.items.map((it) => el("tr", { dataset: { line: it.line } },
    el("td", { dataset: { label: t("col.item") } }, it.title, el("div", { class: "muted" }, it.sku)),
    el("td", { class: "num", dataset: { label: t("col.unit-price") } }, money(it.unit_price)),
    el("td", { class: "num", dataset: { label: t("col.qty") } }, it.qty),
    el("td", { class: "num", dataset: { label: t("col.discount") } }, money(it.discount)),
    el("td", { class: "num", dataset: { label: t("col.payable") } }, money(it.payable)))));
  $("#shipments").replaceChildren(shipments(o));
  $("#aftersales").replaceChildren(afterSales(o));
  drawAsk(o, saved["ask-kind"]); // the kind chosen stays, if the order still allows it
  for (const [id, v] of Object.entries(saved)) {
    const e = document.getElementById(id);
    if (e && id !== "ask-kind") e.value = v;
  }
  if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
  tick();
}

function kv(label, ...value) { return [el("span", { class: "muted" }, label), el("span", {}, ...value)]; }

function fail(where, e, button) {
  $(where).textContent = e.message;
  if (button) button.disabled = false;
}

function drawSummary(o) {
  const actions = el("div", { class: "row" });
  if (o.status === "PENDING_PAYMENT") {
    actions.append(el("a", { class: "button", id: "pay-link", href: "/pay/" + encodeURIComponent(o.order_no) }, t("pay")),
      el("button", { class: "danger", id: "cancel", onclick: cancel }, t("cancel-order")));
  }
  $("#summary").replaceChildren(el("div", { class: "kv" },
    kv(t("status"), badge("order", o.status, { id: "status" }),
      o.refund_status && o.refund_status !== "NONE" ? [" ", badge("refund", o.refund_status, { id: "refund-status" })] : ""),
    kv(t("buyer"), o.buyer_id),
    kv(t("total"), money(o.total)),
    o.discount > 0 && kv(t("discount"), money(o.discount)),
    kv(t("payable"), el("strong", {}, money(o.payable))),
    o.refunded > 0 && kv(t("refunded-amount"), el("span", { id: "refunded" }, money(o.refunded))),
    kv(t("created"), when(o.created_at)),
    o.paid_at && kv(t("paid"), when(o.paid_at)),
    o.cancelled_at && kv(t("cancelled"), when(o.cancelled_at)),
    o.status === "PENDING_PAYMENT" && kv(t("time-left"), el("span", { id: "time-left", dataset: { left: o.remaining_seconds } }))),
  actions, el("p", { class: "error", id: "summary-error" }));
}

// The address can change while the order is unpaid or paid, that is until the first
// parcel ships (the API's rule).
function drawAddress(o) {
  const a = o.address;
  const editable = o.status === "PENDING_PAYMENT" || o.status === "PAID";
  const box = $("#address");
  box.replaceChildren(a
    ? el("p", { id: "address-current" }, el("strong", {}, a.name), " ", a.phone, el("br"), a.detail)
    : el("p", { id: "address-current", class: "muted" }, t("no-address")));
  if (!editable) {
    if (o.status === "SHIPPED" || o.status === "RECEIVED" || o.status === "COMPLETED") box.append(el("p", { class: "muted" }, t("address-fixed")));
    return;
  }
  const field = (id, key, value, attrs) => el("label", { class: "field" + (id === "addr-detail" ? " wide" : "") }, el("span", { class: "muted" }, t(key)),
    el("input", Object.assign({ id, value: value || "" }, attrs || {})));
  box.append(el("form", { id: "address-form", class: "form-grid", onsubmit: saveAddress },
    field("addr-name", "addr.name", a && a.name, { autocomplete: "name" }),
    field("addr-phone", "addr.phone", a && a.phone, { autocomplete: "tel", type: "tel" }),
    field("addr-detail", "addr.detail", a && a.detail, { autocomplete: "street-address" }),
    el("div", { class: "row wide" }, el("button", { id: "addr-save", type: "submit" }, t("save-address")),
      el("span", { class: "muted", id: "address-note" }))),
  el("p", { class: "error", id: "address-error" }));
}

async function saveAddress(ev) {
  ev.preventDefault();
  const button = $("#addr-save");
  button.disabled = true;
  $("#address-error").textContent = "";
  try {
    await buyerWrite(orderURL + "/address", "PATCH", { name: $("#addr-name").value.trim(), phone: $("#addr-phone").value.trim(), detail: $("#addr-detail").value.trim() });
    await refresh(false);
    $("#address-note").textContent = t("address-saved");
  } catch (e) {
    fail("#address-error", e, button);
  }
}

async function cancel(ev) {
  ev.target.disabled = true;
  try {
    await api(orderURL + "/cancel", { method: "POST", headers: { "X-Buyer-Id": buyerId() } });
    await refresh(false);
  } catch (e) {
    fail("#summary-error", e, ev.target);
  }
}

function lineOf(o, line) { return o.items.find((it) => it.line === line) || { line, title: "", sku: "" }; }

// unitList shows a parcel's or a request's units: "sku × qty", what of them was refunded,
// and their amount.
function unitList(o, items) {
  return el("ul", { class: "units" }, (items || []).map((it) => {
    const l = lineOf(o, it.line);
    return el("li", { dataset: { line: it.line } }, l.title && l.title !== it.sku ? l.title + " · " : "", (it.sku || l.sku) + " × " + it.qty,
      it.refunded ? el("span", { class: "muted" }, " (" + t("units-refunded", it.refunded) + ")") : "",
      it.amount ? el("span", { class: "muted" }, " " + money(it.amount)) : "");
  }));
}

function none() { return el("p", { class: "muted" }, t("none-yet")); }

// shipments are the order's parcels: who carries them, how long the buyer has to confirm
// receipt before it is confirmed for them, and the buttons that do it or extend it.
function shipments(o) {
  const list = o.shipments || [];
  if (list.length === 0) return none();
  return el("div", {}, list.map((sh) => {
    const buttons = el("div", { class: "row" });
    if (sh.status === "SHIPPED") {
      buttons.append(el("button", { dataset: { confirm: sh.shipment_no }, onclick: (ev) => shipmentStep(ev, sh, "confirm") }, t("confirm-receipt")));
      if (!sh.buyer_extended) buttons.append(el("button", { class: "secondary", dataset: { extend: sh.shipment_no }, onclick: (ev) => shipmentStep(ev, sh, "extend") }, t("extend")));
    }
    return el("div", { class: "shipment", dataset: { shipment: sh.shipment_no, status: sh.status } },
      el("div", { class: "kv" },
        kv(t("parcel"), el("strong", { class: "order-no" }, sh.shipment_no), " ", badge("shipment", sh.status)),
        sh.carrier && kv(t("carrier"), el("span", { class: "tracking" }, sh.carrier + " " + (sh.tracking_no || ""))),
        sh.shipped_at && kv(t("shipped"), when(sh.shipped_at)),
        sh.status === "SHIPPED" && kv(t("receipt-in"), el("span", { class: "receipt-left", dataset: { left: sh.receipt_remaining_seconds } })),
        sh.received_at && kv(t("received"), when(sh.received_at)),
        kv(t("contents"), unitList(o, sh.items))),
      sh.status === "SHIPPED" && sh.buyer_extended ? el("p", { class: "muted extended" }, t("extended")) : "",
      buttons, el("p", { class: "error", dataset: { errorFor: sh.shipment_no } }));
  }));
}

async function shipmentStep(ev, sh, step) {
  const button = ev.target;
  button.disabled = true;
  const errorBox = document.querySelector(`[data-error-for="${CSS.escape(sh.shipment_no)}"]`);
  try {
    await buyerWrite(orderURL + "/shipments/" + encodeURIComponent(sh.shipment_no) + "/" + step, "POST");
    await refresh(false);
  } catch (e) {
    errorBox.textContent = e.message;
    button.disabled = false;
  }
}

// afterSales are the buyer's refund and return requests, each with its progress in words,
// and for a return the goods still have to go back to, the form that says how they went.
function afterSales(o) {
  const list = o.refunds || [];
  if (list.length === 0) return none();
  return el("div", {}, list.map((a) => {
    const sentBack = a.status === "AWAITING_GOODS" && a.return_tracking_no;
    const box = el("div", { class: "aftersale", dataset: { afterSale: a.after_sale_no, status: a.status, kind: a.kind } },
      el("div", { class: "kv" },
        kv(t("kind." + a.kind), el("strong", { class: "order-no" }, a.after_sale_no), " ", badge("aftersale", a.status, {}, sentBack ? "SENT_BACK" : "")),
        kv(t("amount"), el("span", { class: "amount" }, money(a.amount))),
        a.reason && kv(t("reason"), a.reason),
        a.return_tracking_no && kv(t("sent-back"), (a.return_carrier || "") + " " + a.return_tracking_no),
        kv(t("requested"), when(a.created_at)),
        a.refunded_at && kv(t("refunded-at"), el("span", { class: "refunded-at" }, when(a.refunded_at))),
        kv(t("units"), unitList(o, a.items))));
    if (a.kind === "return" && a.status === "AWAITING_GOODS" && !a.return_tracking_no) {
      const no = a.after_sale_no;
      box.append(el("form", { class: "form-grid ship-back", onsubmit: (ev) => shipBack(ev, no) },
        el("h3", { class: "wide" }, t("ship-back")),
        el("label", { class: "field" }, el("span", { class: "muted" }, t("ship-back-carrier")), el("input", { id: "carrier-" + no, name: "carrier" })),
        el("label", { class: "field" }, el("span", { class: "muted" }, t("ship-back-tracking")), el("input", { id: "tracking-" + no, name: "tracking_no" })),
        el("div", { class: "row wide" }, el("button", { type: "submit", dataset: { shipBack: no } }, t("ship-back-button")))),
      el("p", { class: "error", dataset: { errorFor: no } }));
    }
    return box;
  }));
}

async function shipBack(ev, no) {
  ev.preventDefault();
  const button = ev.target.querySelector("button");
  button.disabled = true;
  try {
    await buyerWrite(orderURL + "/refunds/" + encodeURIComponent(no) + "/ship-back", "POST",
      { carrier: $("#carrier-" + CSS.escape(no)).value.trim(), tracking_no: $("#tracking-" + CSS.escape(no)).value.trim() });
    await refresh(false);
  } catch (e) {
    document.querySelector(`[data-error-for="${CSS.escape(no)}"]`).textContent = e.message;
    button.disabled = false;
  }
}

// available says, line by line, how many units the buyer may still ask to refund (still in
// parcels that have not shipped) and to return (in parcels shipped, or received within the
// return window), by the API's rules: a unit is asked for once, whatever the kind, until
// its request is rejected; a refund not yet reviewed holds its units in their parcel.
function available(o) {
  const out = {};
  const now = serverNow(), windowMs = RETURN_WINDOW_DAYS * 86400 * 1000;
  for (const it of o.items) out[it.line] = { unshipped: 0, shipped: 0, requested: 0, returns: 0, promised: 0, qty: it.qty };
  for (const p of o.shipments || []) {
    for (const it of p.items || []) {
      const u = out[it.line];
      if (!u) continue;
      if (p.status === "PENDING") u.unshipped += it.qty - (it.refunded || 0);
      else if (p.status === "SHIPPED" || (p.status === "RECEIVED" && p.received_at && now < Date.parse(p.received_at) + windowMs)) u.shipped += it.qty;
    }
  }
  for (const a of o.refunds || []) {
    if (a.status === "REJECTED") continue;
    for (const it of a.items || []) {
      const u = out[it.line];
      if (!u) continue;
      u.requested += it.qty;
      if (a.kind === "return") u.returns += it.qty;
      else if (a.status === "REQUESTED") u.promised += it.qty;
    }
  }
  const res = {};
  for (const [line, u] of Object.entries(out)) {
    const left = u.qty - u.requested;
    res[line] = { refund: Math.max(0, Math.min(left, u.unshipped - u.promised)), return: Math.max(0, Math.min(left, u.shipped - u.returns)) };
  }
  return res;
}

// drawAsk draws the request form: the kinds the order allows now, and for the chosen one
// each line with units left, up to how many.
function drawAsk(o, kind) {
  const box = $("#ask");
  if (!["PAID", "SHIPPED", "RECEIVED", "COMPLETED"].includes(o.status)) {
    box.classList.add("hidden");
    box.replaceChildren();
    return;
  }
  box.classList.remove("hidden");
  const avail = available(o);
  const kinds = ["refund", "return"].filter((k) => Object.values(avail).some((a) => a[k] > 0));
  if (kinds.length === 0) {
    box.replaceChildren(el("h3", {}, t("ask")), el("p", { class: "muted", id: "ask-nothing" }, t("ask.nothing")));
    return;
  }
  if (!kinds.includes(kind)) kind = kinds[0];
  const lines = o.items.filter((it) => avail[it.line][kind] > 0);
  box.replaceChildren(el("form", { id: "ask-form", onsubmit: ask },
    el("h3", {}, t("ask")),
    el("label", { class: "field" }, el("span", { class: "muted" }, t("ask.kind")),
      el("select", { id: "ask-kind", onchange: (ev) => drawAsk(order, ev.target.value) },
        kinds.map((k) => el("option", { value: k, selected: k === kind }, t("ask." + k))))),
    scroller(el("table", { id: "ask-lines" }, el("tbody", {}, lines.map((it) => el("tr", { dataset: { line: it.line } },
      el("td", {}, it.title, el("div", { class: "muted" }, it.sku)),
      el("td", { class: "muted" }, t("ask.up-to", avail[it.line][kind])),
      el("td", { class: "num" }, el("input", { id: "ask-qty-" + it.line, type: "number", class: "qty", min: 0, max: avail[it.line][kind], value: 0,
        title: t("ask.units"), dataset: { line: it.line } }))))))),
    el("label", { class: "field" }, el("span", { class: "muted" }, t("ask.reason")), el("input", { id: "ask-reason", maxLength: 256 })),
    el("div", { class: "row" }, el("button", { id: "ask-submit", type: "submit" }, t("ask.submit")))),
  el("p", { class: "error", id: "ask-error" }));
}

async function ask(ev) {
  ev.preventDefault();
  const button = $("#ask-submit");
  $("#ask-error").textContent = "";
  const items = [];
  for (const input of document.querySelectorAll("#ask-lines input[data-line]")) {
    const qty = parseInt(input.value, 10) || 0;
    if (qty > 0) items.push({ line: Number(input.dataset.line), qty });
  }
  if (items.length === 0) {
    $("#ask-error").textContent = t("ask.none");
    return;
  }
  button.disabled = true;
  try {
    await buyerWrite(orderURL + "/refunds", "POST", { kind: $("#ask-kind").value, reason: $("#ask-reason").value.trim(), items });
    await refresh(false);
  } catch (e) {
    fail("#ask-error", e, button);
  }
}

document.addEventListener("DOMContentLoaded", load);
