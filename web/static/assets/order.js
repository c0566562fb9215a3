// One order: its items, its status, its shipments and its after-sales.
"use strict";

const orderNo = decodeURIComponent(location.pathname.split("/").pop());

function badge(s) { return el("span", { class: "status " + s }, s); }

function none(list) { return !Array.isArray(list) || list.length === 0; }

// unitList shows a parcel's or a request's units: "sku × qty", and what of them was refunded.
function unitList(items) {
  return el("ul", { class: "units" }, (items || []).map((it) => el("li", {}, (it.sku || "line " + it.line) + " × " + it.qty,
    it.refunded ? el("span", { class: "muted" }, " (" + it.refunded + " refunded)") : "",
    it.amount ? el("span", { class: "muted" }, " " + money(it.amount)) : "")));
}

// shipments are the order's parcels: who carries them, and how long the buyer has to
// confirm receipt before it is confirmed for them.
function shipments(list) {
  if (none(list)) return el("p", { class: "muted" }, "none yet");
  return el("div", {}, list.map((sh) => el("div", { class: "kv shipment", dataset: { shipment: sh.shipment_no, status: sh.status } },
    el("span", { class: "muted" }, "Parcel"), el("span", {}, el("strong", {}, sh.shipment_no), " ", badge(sh.status)),
    sh.carrier && [el("span", { class: "muted" }, "Carrier"), el("span", { class: "tracking" }, sh.carrier + " " + (sh.tracking_no || ""))],
    sh.shipped_at && [el("span", { class: "muted" }, "Shipped"), el("span", {}, fmtTime(sh.shipped_at))],
    sh.status === "SHIPPED" && sh.receipt_remaining && [el("span", { class: "muted" }, "Receipt confirmed in"), el("span", {}, sh.receipt_remaining)],
    sh.received_at && [el("span", { class: "muted" }, "Received"), el("span", {}, fmtTime(sh.received_at))],
    el("span", { class: "muted" }, "Contents"), unitList(sh.items))));
}

// afterSales are the buyer's refund and return requests.
function afterSales(list) {
  if (none(list)) return el("p", { class: "muted" }, "none yet");
  return el("div", {}, list.map((a) => el("div", { class: "kv aftersale", dataset: { afterSale: a.after_sale_no, status: a.status } },
    el("span", { class: "muted" }, a.kind === "return" ? "Return" : "Refund"), el("span", {}, el("strong", {}, a.after_sale_no), " ", badge(a.status)),
    el("span", { class: "muted" }, "Amount"), el("span", { class: "amount" }, money(a.amount)),
    a.reason && [el("span", { class: "muted" }, "Reason"), el("span", {}, a.reason)],
    a.return_tracking_no && [el("span", { class: "muted" }, "Sent back"), el("span", {}, (a.return_carrier || "") + " " + a.return_tracking_no)],
    el("span", { class: "muted" }, "Requested"), el("span", {}, fmtTime(a.created_at)),
    a.refunded_at && [el("span", { class: "muted" }, "Refunded"), el("span", {}, fmtTime(a.refunded_at))],
    el("span", { class: "muted" }, "Units"), unitList(a.items))));
}

async function load() {
  await loadSession();
  $("#top").replaceWith(buyerHeader(""));
  $("#order-no").textContent = orderNo;
  let o;
  try {
    o = await api("/v1/orders/" + encodeURIComponent(orderNo));
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  render(o);
}

function render(o) {
  const actions = el("div", { class: "row" });
  if (o.status === "PENDING_PAYMENT") {
    actions.append(el("a", { class: "button", id: "pay-link", href: "/pay/" + encodeURIComponent(o.order_no) }, "Pay"),
      el("button", { class: "danger", id: "cancel", onclick: cancel }, "Cancel order"));
  }
  $("#summary").replaceChildren(el("div", { class: "kv" },
    el("span", { class: "muted" }, "Status"), el("span", {}, statusBadge(o.status)),
    el("span", { class: "muted" }, "Buyer"), el("span", {}, o.buyer_id),
    el("span", { class: "muted" }, "Total"), el("span", {}, money(o.total)),
    el("span", { class: "muted" }, "Discount"), el("span", {}, money(o.discount)),
    el("span", { class: "muted" }, "Payable"), el("strong", {}, money(o.payable)),
    el("span", { class: "muted" }, "Created"), el("span", {}, fmtTime(o.created_at)),
    o.paid_at && [el("span", { class: "muted" }, "Paid"), el("span", {}, fmtTime(o.paid_at))],
    o.cancelled_at && [el("span", { class: "muted" }, "Cancelled"), el("span", {}, fmtTime(o.cancelled_at))],
    o.status === "PENDING_PAYMENT" && [el("span", { class: "muted" }, "Time left"), el("span", {}, o.remaining)]), actions);
  $("#items tbody").replaceChildren(...o.items.map((it) => el("tr", {},
    el("td", {}, it.title, el("div", { class: "muted" }, it.sku)), el("td", { class: "num" }, money(it.unit_price)),
    el("td", { class: "num" }, it.qty), el("td", { class: "num" }, money(it.discount)), el("td", { class: "num" }, money(it.payable)))));
  $("#shipments").replaceChildren(shipments(o.shipments));
  $("#aftersales").replaceChildren(afterSales(o.refunds));
}

async function cancel(ev) {
  ev.target.disabled = true;
  try {
    render(await api("/v1/orders/" + encodeURIComponent(orderNo) + "/cancel", { method: "POST", headers: { "X-Buyer-Id": buyerId() } }));
  } catch (e) {
    $("#error").textContent = e.message;
    ev.target.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", load);
