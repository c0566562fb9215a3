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

// The buyer's session. With buyer authentication (jwt), the shop's login opens these pages
// with the buyer's token in the URL's fragment (#token=…): it is kept in this tab's
// sessionStorage, sent as Authorization: Bearer on every call, and never put in a URL the
// server sees. The server says which mode it runs in and whose the token is
// (GET /v1/session). In mode none, the demo's, the buyer is whoever this browser says.
const session = { mode: "none", buyer: "", reason: "" };

function buyerToken() { return sessionStorage.getItem("orderpay.token") || ""; }

function authHeaders() {
  const t = buyerToken();
  return t ? { Authorization: "Bearer " + t } : {};
}

async function loadSession() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("orderpay.token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  try {
    const s = await api("/v1/session");
    session.mode = s.buyer_auth;
    session.buyer = s.buyer_id || "";
    session.reason = s.reason || "";
  } catch (e) {
    session.reason = e.message;
  }
}

// api calls the JSON API; a non-2xx answer throws an Error with the API's code and message.
async function api(path, opts = {}) {
  const headers = Object.assign(authHeaders(), opts.headers || {});
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

// buyerId is the signed-in buyer; in mode none, whoever this browser says it is.
function buyerId() {
  if (session.mode !== "none") return session.buyer;
  let id = localStorage.getItem("orderpay.buyer");
  if (!id) {
    id = "buyer-" + Math.random().toString(36).slice(2, 8);
    localStorage.setItem("orderpay.buyer", id);
  }
  return id;
}

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

// openEvents follows a server-sent event stream: with EventSource when no token is needed,
// else by fetch (EventSource cannot send Authorization). onEvent gets each event's name and
// data; onFail is called once the stream cannot go on (refused, or dropped too often).
// It returns a function that stops it.
function openEvents(url, onEvent, onFail) {
  if (!buyerToken() && window.EventSource) {
    const es = new EventSource(url);
    let errors = 0;
    es.addEventListener("order", (e) => { errors = 0; onEvent("order", e.data); });
    es.onerror = () => {
      // EventSource reconnects by itself after a dropped stream; if it keeps failing (a
      // proxy that buffers, a cap on streams), give up and let the page poll.
      if (es.readyState === EventSource.CLOSED || ++errors >= 3) { es.close(); onFail(); }
    };
    return () => es.close();
  }
  const ctl = new AbortController();
  (async () => {
    try {
      const resp = await fetch(url, { headers: authHeaders(), signal: ctl.signal });
      if (!resp.ok || !resp.body) throw new Error("stream refused: " + resp.status);
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let name = "message", data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) data += line.slice(5).trim();
          }
          if (data) onEvent(name, data);
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    if (!ctl.signal.aborted) onFail();
  })();
  return () => ctl.abort();
}

// setImage shows an image the API serves to the signed-in buyer only: fetched with the
// token (an <img src> cannot send one) and shown from a blob.
async function setImage(img, url) {
  if (!buyerToken()) { img.src = url; return; }
  const resp = await fetch(url, { headers: authHeaders() });
  if (!resp.ok) throw new Error("image: " + resp.status);
  img.src = URL.createObjectURL(await resp.blob());
}
