// The buyer's orders, newest first.
"use strict";

async function load() {
  await loadSession();
  $("#top").replaceWith(buyerHeader("/orders"));
  let orders;
  try {
    orders = (await api("/v1/orders?buyer_id=" + encodeURIComponent(buyerId()))).orders;
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  const body = $("#orders tbody");
  body.replaceChildren(...orders.map((o) => el("tr", {},
    el("td", {}, el("a", { href: "/orders/" + encodeURIComponent(o.order_no) }, o.order_no)),
    el("td", {}, fmtTime(o.created_at)),
    el("td", { class: "num" }, money(o.payable)),
    el("td", {}, el("span", { class: "status " + o.status }, o.status)),
    el("td", {}, o.status === "PENDING_PAYMENT" ? el("a", { href: "/pay/" + encodeURIComponent(o.order_no) }, "Pay") : ""))));
  if (orders.length === 0) body.append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "No orders yet.")));
}

document.addEventListener("DOMContentLoaded", load);
