// The catalogue and the cart: add items, place the order, go to the pay page.
"use strict";

let skus = [];

async function load() {
  await loadSession();
  $("#top").replaceWith(buyerHeader("/"));
  try {
    skus = (await api("/v1/skus")).skus;
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  const body = $("#catalogue tbody");
  body.replaceChildren(...skus.map((s) => {
    const qty = el("input", { type: "number", min: 1, value: 1, size: 3, dataset: { qtyFor: s.sku } });
    return el("tr", {},
      el("td", {}, s.title, el("div", { class: "muted" }, s.sku)),
      el("td", {}, s.product_type),
      el("td", { class: "num" }, money(s.price)),
      el("td", { class: "num" }, s.stock.available),
      el("td", {}, el("div", { class: "row" }, qty, el("button", { class: "secondary", dataset: { add: s.sku }, disabled: s.stock.available <= 0,
        onclick: () => { cart.add(s.sku, Math.max(1, parseInt(qty.value, 10) || 1)); renderCart(); } }, "Add to cart"))));
  }));
  if (skus.length === 0) body.append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, "Nothing for sale yet.")));
  renderCart();
}

function renderCart() {
  const c = cart.read();
  const lines = Object.entries(c).map(([sku, qty]) => ({ sku, qty, item: skus.find((s) => s.sku === sku) })).filter((l) => l.item);
  const box = $("#cart");
  if (lines.length === 0) {
    box.replaceChildren(el("p", { class: "muted" }, "The cart is empty."));
    return;
  }
  const total = lines.reduce((sum, l) => sum + l.item.price * l.qty, 0);
  box.replaceChildren(
    el("table", { id: "cart-lines" }, el("tbody", {}, lines.map((l) => el("tr", {},
      el("td", {}, l.item.title), el("td", { class: "num" }, "× " + l.qty), el("td", { class: "num" }, money(l.item.price * l.qty)),
      el("td", {}, el("button", { class: "secondary", onclick: () => { cart.add(l.sku, -l.qty); renderCart(); } }, "Remove")))))),
    el("div", { class: "row" }, el("strong", {}, "Total " + money(total)),
      el("input", { id: "coupon", placeholder: "coupon id (optional)" }),
      el("button", { id: "place-order", onclick: placeOrder }, "Place order")));
}

async function placeOrder(ev) {
  const button = ev.target;
  button.disabled = true;
  $("#error").textContent = "";
  const items = Object.entries(cart.read()).map(([sku, qty]) => ({ sku, qty }));
  const body = { buyer_id: buyerId(), items };
  const coupon = $("#coupon").value.trim();
  if (coupon) body.coupon_id = coupon;
  try {
    // One key per click: a retried request cannot create a second order.
    const o = await api("/v1/orders", { method: "POST", body, headers: { "Idempotency-Key": randomKey(), "X-Buyer-Id": buyerId() } });
    cart.clear();
    location.href = "/pay/" + encodeURIComponent(o.order_no);
  } catch (e) {
    $("#error").textContent = e.message;
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", load);
