// The buyer's orders, newest first.
"use strict";

let orders = null;

async function load() {
  await loadSession();
  showHeader("/orders");
  onLang(() => { if (orders) render(); });
  try {
    orders = (await api("/v1/orders?buyer_id=" + encodeURIComponent(buyerId()))).orders;
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  render();
}

function render() {
  const body = $("#orders tbody");
  const cell = (label, attrs, ...children) => el("td", Object.assign({ dataset: { label } }, attrs || {}), ...children);
  body.replaceChildren(...orders.map((o) => el("tr", { dataset: { order: o.order_no } },
    cell(t("col.order"), { class: "order-no" }, el("a", { href: "/orders/" + encodeURIComponent(o.order_no) }, o.order_no)),
    cell(t("col.created"), {}, when(o.created_at)),
    cell(t("col.amount"), { class: "num" }, money(o.payable)),
    cell(t("col.status"), {}, badge("order", o.status)),
    el("td", {}, o.status === "PENDING_PAYMENT" ? el("a", { class: "button", href: "/pay/" + encodeURIComponent(o.order_no) }, t("pay")) : ""))));
  if (orders.length === 0) body.append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, t("no-orders"))));
}

document.addEventListener("DOMContentLoaded", load);
