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

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// formatTime is how every page writes a time, in the reader's time zone and to the second,
// whatever the browser's locale: "27 Nov 2026, 12:16:22" in English and
// "2026年11月27日 12:16:22" in Chinese. The buyer's pages and the till write in their
// language (when, buyer.js); the console and the wallet in English (fmtTime).
function formatTime(s, language) {
  if (!s) return "";
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) return String(s);
  const p = (n) => String(n).padStart(2, "0");
  const clock = p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
  if (language === "zh") return d.getFullYear() + "年" + (d.getMonth() + 1) + "月" + d.getDate() + "日 " + clock;
  return d.getDate() + " " + MONTHS[d.getMonth()] + " " + d.getFullYear() + ", " + clock;
}

// fmtTime writes a time in English, for the pages that have no other language.
function fmtTime(s) { return formatTime(s, "en"); }

// channelName is a channel's name in English, as the pages without another language show
// it; an unknown channel shows as it is.
function channelName(ch) { return { alipay: "Alipay", wechat: "WeChat Pay" }[ch] || ch; }

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

// openEvents follows a server-sent event stream of events named event ("order" unless
// given; a ticket's stream sends "ticket"): with EventSource when no token is needed, else
// by fetch (EventSource cannot send Authorization). onEvent gets each event's name and
// data; onFail is called once the stream cannot go on (refused, or dropped too often).
// It returns a function that stops it.
function openEvents(url, onEvent, onFail, event = "order") {
  if (!buyerToken() && window.EventSource) {
    const es = new EventSource(url);
    let errors = 0;
    es.addEventListener(event, (e) => { errors = 0; onEvent(event, e.data); });
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

// The cashier's words (the pay page, pay.js), in English and Chinese: pay.js adds them to
// the buyer pages' STRINGS (buyer.js).
const CASHIER_STRINGS = {
  en: {
    "m.alipay-pc": "Alipay on the web", "m.alipay-inapp": "Alipay (in the app)",
    "hint.desktop": "Scan a code with your phone, or pay on Alipay's website.",
    "hint.phone": "The wallet's app opens to pay, then brings you back here.",
    "hint.wechat": "Pay with WeChat Pay, right here in WeChat.",
    "hint.alipay": "Pay with Alipay, right here in Alipay.",
    "one.title": "One code for both wallets", "one.scan": "Scan with WeChat or Alipay",
    "one.alt": "A code either wallet can scan",
    "more.alipay": "Show Alipay's code too", "more.wechat": "Show WeChat Pay's code too",
    "checking": "Checking the payment with the channel…",
    "checking.said": "Alipay says you paid. Confirming it with Alipay…",
    "checking.long": "Not paid yet. If you left the cashier without paying, choose a way to pay again.",
    "next.page": (ch) => ["You started paying on ", ch, "'s page."],
    "next.wallet": (ch) => [ch, " is ready to pay this order."],
    "next.app": (ch) => ["Open the shop's app to pay this order with ", ch, "."],
    "continue": "Continue paying", "going": "Opening the cashier…",
    "need.wechat": "Open this page inside WeChat to pay with WeChat Pay.",
    "need.alipay": "Open this page inside Alipay to pay with Alipay.",
    "wallet.cancel": "You left the wallet without paying.",
    "wallet.fail": (msg) => "The wallet said: " + msg,
    "scan.note": "You pay this order with your own wallet, the one signed in here, and this order only.",
    "scan.ended": "This code's session has ended: scan the code on the pay page again.",
    "scan.nowallet": "Nothing here can pay this order: open the code in a phone's browser, or scan it with the wallet's own scanner.",
  },
  zh: {
    "m.alipay-pc": "支付宝网页支付", "m.alipay-inapp": "支付宝（应用内）",
    "hint.desktop": "用手机扫码支付，或在支付宝网页上付款。",
    "hint.phone": "将打开钱包应用付款，付款后回到本页。",
    "hint.wechat": "在微信内直接用微信支付付款。",
    "hint.alipay": "在支付宝内直接付款。",
    "one.title": "聚合码", "one.scan": "微信、支付宝扫码均可支付",
    "one.alt": "微信或支付宝都能扫的二维码",
    "more.alipay": "同时显示支付宝二维码", "more.wechat": "同时显示微信支付二维码",
    "checking": "正在向支付渠道确认付款结果…",
    "checking.said": "支付宝显示您已付款，正在向支付宝确认…",
    "checking.long": "尚未收到付款。如果您没有完成支付，请重新选择支付方式。",
    "next.page": (ch) => ["您已开始在", ch, "的页面付款。"],
    "next.wallet": (ch) => [ch, "已准备好支付本订单。"],
    "next.app": (ch) => ["请打开商城 App，用", ch, "支付本订单。"],
    "continue": "继续支付", "going": "正在打开收银台…",
    "need.wechat": "请在微信中打开本页，使用微信支付。",
    "need.alipay": "请在支付宝中打开本页付款。",
    "wallet.cancel": "您已退出支付，未付款。",
    "wallet.fail": (msg) => "钱包提示：" + msg,
    "scan.note": "您将用本机登录的钱包为本订单付款，仅限本订单。",
    "scan.ended": "扫码会话已结束：请重新扫描支付页上的二维码。",
    "scan.nowallet": "此处无法支付本订单：请在手机浏览器中打开，或用钱包自带的扫一扫扫码。",
  },
};
