// One order: its items, its status, its shipments and its after-sales.
"use strict";

const orderNo = decodeURIComponent(location.pathname.split("/").pop());

// rows renders records whose fields the page does not assume: each one's scalar fields
// as a small key/value list.
function records(list) {
  if (!Array.isArray(list) || list.length === 0) return el("p", { class: "muted" }, "none yet");
  return el("div", {}, list.map((r) => el("div", { class: "kv card" },
    Object.entries(r).filter(([, v]) => v === null || typeof v !== "object").flatMap(([k, v]) => [
      el("span", { class: "muted" }, k),
      el("span", {}, /amount|refund|payable/.test(k) && typeof v === "number" ? money(v) : (/_at$/.test(k) && v ? fmtTime(v) : String(v ?? ""))),
    ]))));
}

async function load() {
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
  $("#shipments").replaceChildren(records(o.shipments));
  $("#aftersales").replaceChildren(records(o.refunds));
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
