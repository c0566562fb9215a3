// Shared helpers of orderpay's pages. The DOM is built with el(), never from HTML strings,
// so that nothing a server or a channel sent can run as script.
"use strict";

// el builds an element: attrs sets properties (on*, class, dataset…), children are nodes or text.
function el(tag, attrs, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.setAttribute("class", v);
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (e instanceof SVGElement || k.includes("-") || k === "for") e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

function $(sel) { return document.querySelector(sel); }

// money shows fen as yuan without floating point.
function money(fen) {
  const neg = fen < 0, f = Math.abs(fen);
  return (neg ? "-" : "") + "¥" + Math.floor(f / 100) + "." + String(f % 100).padStart(2, "0");
}

function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return d.toLocaleString(undefined, { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// api calls the JSON API; a non-2xx answer throws an Error with the API's code and message.
async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method: opts.method || "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!resp.ok) {
    const err = new Error((data && data.error && data.error.message) || resp.status + " " + resp.statusText);
    err.code = data && data.error && data.error.code;
    err.status = resp.status;
    throw err;
  }
  return data;
}

// The buyer is whoever this browser says it is: the API has no buyer login yet.
function buyerId() {
  let id = localStorage.getItem("orderpay.buyer");
  if (!id) {
    id = "buyer-" + Math.random().toString(36).slice(2, 8);
    localStorage.setItem("orderpay.buyer", id);
  }
  return id;
}

function buyerHeader(active) {
  const input = el("input", { id: "buyer-id", value: buyerId(), title: "buyer id", onchange: (e) => {
    const v = e.target.value.trim();
    if (v) localStorage.setItem("orderpay.buyer", v);
    location.reload();
  } });
  const link = (href, text) => el("a", { href, class: active === href ? "active" : "" }, text);
  return el("header", {}, el("span", { class: "brand" }, "orderpay"),
    el("nav", {}, link("/", "Catalogue"), link("/orders", "My orders")),
    el("span", { class: "who" }, "buyer ", input));
}

function statusBadge(s) { return el("span", { class: "status " + s, id: "status", dataset: { status: s } }, s); }

// The cart lives in this browser until the order is placed.
const cart = {
  read() { try { return JSON.parse(localStorage.getItem("orderpay.cart") || "{}"); } catch (_) { return {}; } },
  write(c) { localStorage.setItem("orderpay.cart", JSON.stringify(c)); },
  add(sku, qty) { const c = cart.read(); c[sku] = (c[sku] || 0) + qty; if (c[sku] <= 0) delete c[sku]; cart.write(c); },
  clear() { localStorage.removeItem("orderpay.cart"); },
};

function randomKey() {
  const a = new Uint8Array(16);
  crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}
