// The catalogue and the cart: add items, give the delivery address, place the order, go to
// the pay page.
"use strict";

let skus = null;
const ADDRESS = "orderpay.address"; // the last address this browser ordered with

async function load() {
  await loadSession();
  showHeader("/");
  onLang(() => { if (skus) { renderCatalogue(); renderCart(); } });
  try {
    skus = (await api("/v1/skus")).skus;
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  renderCatalogue();
  renderCart();
}

// cell is a table cell that, on a narrow screen where the table reflows into cards, shows
// its column's name beside it.
function cell(label, attrs, ...children) {
  return el("td", Object.assign({ dataset: { label } }, attrs || {}), ...children);
}

function renderCatalogue() {
  const body = $("#catalogue tbody");
  body.replaceChildren(...skus.map((s) => {
    const qty = el("input", { type: "number", min: 1, value: 1, size: 3, class: "qty", title: t("col.qty"), dataset: { qtyFor: s.sku } });
    return el("tr", {},
      cell(t("col.item"), {}, s.title, el("div", { class: "muted" }, s.sku)),
      cell(t("col.type"), { class: "type", "data-type": s.product_type }, ("type." + s.product_type) in STRINGS.en ? t("type." + s.product_type) : s.product_type),
      cell(t("col.price"), { class: "num" }, money(s.price)),
      cell(t("col.stock"), { class: "num" }, s.stock.available),
      el("td", {}, el("div", { class: "row" }, qty, el("button", { class: "secondary", dataset: { add: s.sku }, disabled: s.stock.available <= 0,
        onclick: () => { cart.add(s.sku, Math.max(1, parseInt(qty.value, 10) || 1)); renderCart(); } }, t("add")))));
  }));
  if (skus.length === 0) body.append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, t("nothing-for-sale"))));
}

// addressDraft is what the address fields hold now, else the last address ordered with.
function addressDraft() {
  if ($("#addr-name")) return { name: $("#addr-name").value, phone: $("#addr-phone").value, detail: $("#addr-detail").value };
  try { return JSON.parse(localStorage.getItem(ADDRESS) || "{}"); } catch (_) { return {}; }
}

function renderCart() {
  const c = cart.read();
  const lines = Object.entries(c).map(([sku, qty]) => ({ sku, qty, item: skus.find((s) => s.sku === sku) })).filter((l) => l.item);
  const box = $("#cart");
  if (lines.length === 0) {
    box.replaceChildren(el("p", { class: "muted" }, t("cart-empty")));
    return;
  }
  const a = addressDraft(), coupon = $("#coupon") ? $("#coupon").value : "";
  const total = lines.reduce((sum, l) => sum + l.item.price * l.qty, 0);
  const field = (id, key, value, attrs) => el("label", { class: "field" + (id === "addr-detail" ? " wide" : "") }, el("span", { class: "muted" }, t(key)),
    el("input", Object.assign({ id, value: value || "" }, attrs || {})));
  box.replaceChildren(
    scroller(el("table", { id: "cart-lines" }, el("tbody", {}, lines.map((l) => el("tr", {},
      el("td", {}, l.item.title), el("td", { class: "num" }, "× " + l.qty), el("td", { class: "num" }, money(l.item.price * l.qty)),
      el("td", {}, el("button", { class: "secondary", onclick: () => { cart.add(l.sku, -l.qty); renderCart(); } }, t("remove")))))))),
    el("h3", {}, t("deliver-to")),
    el("div", { class: "form-grid", id: "checkout-address" },
      field("addr-name", "addr.name", a.name, { autocomplete: "name" }),
      field("addr-phone", "addr.phone", a.phone, { autocomplete: "tel", type: "tel" }),
      field("addr-detail", "addr.detail", a.detail, { autocomplete: "street-address" })),
    el("p", { class: "muted small" }, t("addr.optional")),
    el("div", { class: "row" }, el("strong", {}, t("total") + " " + money(total)),
      el("input", { id: "coupon", placeholder: t("coupon"), value: coupon }),
      el("button", { id: "place-order", onclick: placeOrder }, t("place-order"))));
}

async function placeOrder(ev) {
  const button = ev.target;
  button.disabled = true;
  $("#error").textContent = "";
  const items = Object.entries(cart.read()).map(([sku, qty]) => ({ sku, qty }));
  const body = { buyer_id: buyerId(), items };
  const coupon = $("#coupon").value.trim();
  if (coupon) body.coupon_id = coupon;
  // The address goes with the order when any of it is given; the API says what is missing.
  const a = addressDraft();
  for (const k of ["name", "phone", "detail"]) a[k] = (a[k] || "").trim();
  if (a.name || a.phone || a.detail) body.address = a;
  try {
    // One key per click: a retried request cannot create a second order.
    const o = await api("/v1/orders", { method: "POST", body, headers: { "Idempotency-Key": randomKey(), "X-Buyer-Id": buyerId() } });
    cart.clear();
    if (body.address) localStorage.setItem(ADDRESS, JSON.stringify(body.address));
    // A queued SKU answers with a ticket (202): its pay page shows the place in the queue
    // and goes on to the order's when its turn comes.
    location.href = "/pay/" + encodeURIComponent(o.ticket_id || o.order_no);
  } catch (e) {
    $("#error").textContent = e.message;
    button.disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", load);
