// The till page (/pos, docs/pages.md): a counter's cashier scans the buyer's payment code
// and the till takes the money through the counter's API (docs/barcode.md). The till is an
// app of the payments API: its API key, store and till are set up once on the device and
// kept in this browser's localStorage; the key goes out only as Authorization: Bearer,
// never in a URL, and is never written to the console or shown again.
//
// One sale is one Idempotency-Key. A request that gets no answer (the network, a timeout,
// a 5xx or 429) is retried by the cashier with the same key and the same body, so that a
// retry can never charge the buyer twice; a sale that ended, or that the API refused,
// gives the next one a new key. While a sale has no final answer the page refuses another
// scan: scanning again would start a second payment of the same goods.
"use strict";

const POS_STRINGS = {
  en: {
    "title.pos": "orderpay — till", "till": "Till", "settings": "Set-up",
    "who.store": "store", "who.till": "till", "who.key": "key",
    "setup.title": "Set up this till",
    "setup.help": "An admin creates the till as an app of the payments API (POST /admin/apps) and gives you its API key. The key stays in this browser (localStorage), goes out only as a bearer token, never in a URL.",
    "setup.key": "The till's API key", "setup.store": "Store (store_id)", "setup.till": "Till (till_id)",
    "setup.keep": "leave empty to keep the key", "setup.save": "Save", "setup.cancel": "Cancel",
    "setup.forget": "Remove from this browser", "setup.checking": "Checking the key…",
    "setup.need-key": "Enter the till's API key.",
    "setup.bad-id": "Store and till: 1 to 64 letters, digits, _, - or . (the till is required).",
    "setup.refused": "The API key was refused: check it, or ask for the till's new key.",
    "sale.title": "New sale", "sale.amount": "Amount (yuan)", "sale.order": "or a shop order's number",
    "sale.description": "What for (optional)", "sale.scan": "Scan the buyer's payment code",
    "sale.scan-placeholder": "scan, or type the digits and press Enter", "sale.charge": "Charge",
    "sale.hint": "A scanner types the code and presses Enter.",
    "sale.need-amount": "Enter the amount in yuan (such as 12.50), or a shop order's number.",
    "sale.bad-order": "The order number: letters, digits, _, - or . only.",
    "busy.waiting": "A payment is in progress: wait for its result. Do not scan again.",
    "busy.failed": "The last sale has no answer yet: press Retry first (it never charges twice).",
    "r.waiting": "Waiting for the buyer to confirm…",
    "r.waiting-help": "The buyer may be asked for a password in the wallet. Do not scan again.",
    "r.elapsed": (s) => s + " s",
    "r.PAID": "Paid ✓", "r.REFUSED": "Refused: not paid", "r.CANCELLED": "Cancelled: not paid",
    "r.UNKNOWN": "No result yet", "r.unknown-poll": (s) => "The till asks again every " + s + " s.",
    "r.NETWORK": "No answer from orderpay",
    "r.network-help": "The payment may have gone through. Retry asks about the same sale again: it never charges twice.",
    "r.ERROR": "Refused by orderpay", "r.error-help": "Nothing was taken.",
    "r.INVALID": "Not a payment code",
    "r.invalid-help": "WeChat Pay: 18 digits starting 10 to 15. Alipay: 16 to 24 digits starting 25 to 30. Nothing was sent: scan again.",
    "r.for-order": (no) => "order " + no, "r.no": "payment", "r.tail": "code …",
    "retry": "Retry", "abandon": "Start a new sale",
    "abandon.confirm": "The payment may have gone through. Start a new sale anyway? Check this till's last payments before charging again.",
    "recent.title": "This till's last payments", "recent.refresh": "Refresh", "recent.none": "No payments at this till yet.",
    "col.time": "Time", "col.channel": "Channel", "col.code": "Code",
    "s.PAID": "Paid", "s.REFUSED": "Refused", "s.CANCELLED": "Cancelled", "s.UNKNOWN": "Waiting",
  },
  zh: {
    "title.pos": "orderpay — 收银台", "till": "收银台", "settings": "设置",
    "who.store": "门店", "who.till": "收银台", "who.key": "密钥",
    "setup.title": "设置本收银台",
    "setup.help": "由管理员在支付 API 中为收银台创建应用（POST /admin/apps），并把它的 API 密钥交给您。密钥只保存在本浏览器（localStorage）中，只作为 Bearer 令牌发送，绝不出现在网址里。",
    "setup.key": "收银台的 API 密钥", "setup.store": "门店（store_id）", "setup.till": "收银台（till_id）",
    "setup.keep": "留空则保留原密钥", "setup.save": "保存", "setup.cancel": "取消",
    "setup.forget": "从本浏览器删除", "setup.checking": "正在验证密钥…",
    "setup.need-key": "请输入收银台的 API 密钥。",
    "setup.bad-id": "门店和收银台：1 到 64 个字母、数字、_、- 或 .（收银台必填）。",
    "setup.refused": "API 密钥被拒绝：请检查，或向管理员索取收银台的新密钥。",
    "sale.title": "新的一笔", "sale.amount": "金额（元）", "sale.order": "或商城订单号",
    "sale.description": "商品说明（可选）", "sale.scan": "扫描顾客的付款码",
    "sale.scan-placeholder": "扫码，或输入数字后按回车", "sale.charge": "收款",
    "sale.hint": "扫码枪会输入付款码并按回车。",
    "sale.need-amount": "请输入金额（元，例如 12.50），或商城订单号。",
    "sale.bad-order": "订单号只能包含字母、数字、_、- 或 .。",
    "busy.waiting": "正在收款：请等待结果，请勿重复扫码。",
    "busy.failed": "上一笔还没有结果：请先点“重试”（重试不会重复扣款）。",
    "r.waiting": "等待顾客确认…",
    "r.waiting-help": "顾客可能需要在钱包中输入密码。请勿重复扫码。",
    "r.elapsed": (s) => s + " 秒",
    "r.PAID": "支付成功 ✓", "r.REFUSED": "支付被拒绝：未收款", "r.CANCELLED": "已撤销：未收款",
    "r.UNKNOWN": "暂无结果", "r.unknown-poll": (s) => "收银台每 " + s + " 秒查询一次结果。",
    "r.NETWORK": "orderpay 没有应答",
    "r.network-help": "这笔可能已经付款。“重试”会再次查询同一笔交易，绝不会重复扣款。",
    "r.ERROR": "orderpay 拒绝了请求", "r.error-help": "未扣款。",
    "r.INVALID": "不是付款码",
    "r.invalid-help": "微信支付：18 位数字，以 10 到 15 开头。支付宝：16 到 24 位数字，以 25 到 30 开头。未发送：请重新扫码。",
    "r.for-order": (no) => "订单 " + no, "r.no": "收款单号", "r.tail": "付款码尾号 ",
    "retry": "重试", "abandon": "开始新的一笔",
    "abandon.confirm": "这笔可能已经付款。仍要开始新的一笔吗？再次收款前请先查看本收银台的最近收款。",
    "recent.title": "本收银台最近收款", "recent.refresh": "刷新", "recent.none": "本收银台还没有收款。",
    "col.time": "时间", "col.channel": "渠道", "col.code": "付款码",
    "s.PAID": "已支付", "s.REFUSED": "被拒绝", "s.CANCELLED": "已撤销", "s.UNKNOWN": "等待确认",
  },
};
Object.assign(STRINGS.en, POS_STRINGS.en);
Object.assign(STRINGS.zh, POS_STRINGS.zh);
applyStatic();

const SETTINGS_KEY = "orderpay.pos";
const FINAL = ["PAID", "REFUSED", "CANCELLED"];
const REQUEST_TIMEOUT_MS = 150000; // beyond the longest --pos-wait (120 s): the server answers first

// settings are the till's: {key, store, till}; null until it is set up.
let settings = readSettings();
// sale is the sale without a final answer: {key, body, started, state, result, error};
// null when the till is free to take the next one. shown is what the result panel shows.
let sale = null, shown = null;
let ticker = null, pollTimer = null, listTimer = null;

function readSettings() {
  try {
    const s = JSON.parse(localStorage.getItem(SETTINGS_KEY) || "null");
    return s && typeof s.key === "string" && s.key && typeof s.till === "string" && s.till ? s : null;
  } catch (_) {
    return null;
  }
}

const validId = (s) => /^[A-Za-z0-9_.-]{1,64}$/.test(s);

// codeChannel is the channel of a scanned code, by its shape, as the server reads it
// (orderpay.BarcodeChannel): WeChat Pay 18 digits starting 10 to 15; Alipay 16 to 24 digits
// starting 25 to 30; "" for anything else.
function codeChannel(code) {
  if (!/^[0-9]{16,24}$/.test(code)) return "";
  const p = Number(code.slice(0, 2));
  if (code.length === 18 && p >= 10 && p <= 15) return "wechat";
  if (p >= 25 && p <= 30) return "alipay";
  return "";
}

// fenOf reads an amount in yuan as typed ("12", "12.5", "12.50", ".5", "¥0.29") into whole
// fen from its digits, never through a float (0.29 * 100 is 28.999999999999996); null for
// anything else, zero, or more than 99,999,999.99 yuan.
function fenOf(s) {
  const m = /^[¥￥]?\s*([0-9]{0,8})(?:\.([0-9]{0,2}))?$/.exec(s.trim());
  if (!m || (m[1] === "" && !m[2])) return null;
  const fen = Number(m[1] || "0") * 100 + Number((m[2] || "").padEnd(2, "0"));
  return fen > 0 ? fen : null;
}

// posCall calls the counter's API with the till's key. A refusal throws an Error with the
// API's code, message and HTTP status; no answer at all throws one without a status.
async function posCall(path, opts = {}, key) {
  const headers = Object.assign({ Authorization: "Bearer " + (key || settings.key) }, opts.headers || {});
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), opts.timeout || REQUEST_TIMEOUT_MS);
  try {
    const resp = await fetch(path, { method: opts.method || "GET", headers, cache: "no-store", signal: ctl.signal,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { /* not JSON: a proxy's page */ }
    if (!resp.ok) {
      const err = new Error((data && data.error && data.error.message) || resp.status + " " + resp.statusText);
      err.code = data && data.error && data.error.code;
      err.status = resp.status;
      throw err;
    }
    return data;
  } finally {
    clearTimeout(timer);
  }
}

// ---- set-up ----

function showSetup(msg) {
  $("#till").classList.add("hidden");
  $("#setup").classList.remove("hidden");
  $("#settings").classList.add("hidden");
  $("#set-key").value = "";
  $("#set-key").placeholder = settings ? t("setup.keep") : "opk_…";
  $("#set-store").value = settings ? settings.store || "" : "";
  $("#set-till").value = settings ? settings.till : "";
  $("#set-cancel").classList.toggle("hidden", !settings);
  $("#set-forget").classList.toggle("hidden", !settings);
  $("#setup-error").textContent = msg || "";
  drawWho();
  (settings ? $("#set-store") : $("#set-key")).focus();
}

async function saveSetup(ev) {
  ev.preventDefault();
  const key = $("#set-key").value.trim() || (settings ? settings.key : "");
  const store = $("#set-store").value.trim(), till = $("#set-till").value.trim();
  const error = $("#setup-error");
  if (!key) { error.textContent = t("setup.need-key"); return; }
  if (!validId(till) || (store !== "" && !validId(store))) { error.textContent = t("setup.bad-id"); return; }
  // The key is tried before it is kept: a till set up with a wrong key would refuse every
  // sale at the counter.
  error.textContent = t("setup.checking");
  $("#set-save").disabled = true;
  try {
    await posCall("/v1/pos/payments?limit=1&till_id=" + encodeURIComponent(till), { timeout: 20000 }, key);
  } catch (e) {
    error.textContent = e.status === 401 ? t("setup.refused") : (e.code ? e.code + ": " : "") + e.message;
    return;
  } finally {
    $("#set-save").disabled = false;
  }
  settings = { key, store, till };
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
  $("#set-key").value = "";
  error.textContent = "";
  showTill();
}

function forgetSetup() {
  localStorage.removeItem(SETTINGS_KEY);
  settings = null;
  shown = null;
  showSetup();
}

// drawWho names the till in the header: its store, its till and its key's id (the part
// before the secret), never the key.
function drawWho() {
  const who = $("#till-who");
  if (!settings) { who.replaceChildren(); return; }
  const keyId = settings.key.split("_").slice(0, 2).join("_");
  who.replaceChildren(
    settings.store ? el("span", {}, t("who.store") + " ", el("strong", { id: "who-store" }, settings.store)) : "",
    el("span", {}, t("who.till") + " ", el("strong", { id: "who-till" }, settings.till)),
    el("span", { class: "muted" }, t("who.key") + " ", el("code", {}, keyId + "_…")));
}

function showTill() {
  $("#setup").classList.add("hidden");
  $("#till").classList.remove("hidden");
  $("#settings").classList.remove("hidden");
  drawWho();
  drawBusy();
  drawResult();
  loadList();
  focusScan();
}

// ---- the scan field keeps the focus ----

function focusScan() {
  if (!$("#till").classList.contains("hidden")) $("#code").focus({ preventScroll: true });
}

// A scanner types into whatever has the focus: whenever nothing else that takes typing
// has it, the scan field takes it back.
function keepFocus() {
  setTimeout(() => {
    const a = document.activeElement;
    if (!a || a === document.body || a.tagName === "BUTTON") focusScan();
  }, 0);
}

// ---- a sale ----

function go() {
  const codeField = $("#code");
  const code = codeField.value.replace(/\s+/g, "");
  $("#sale-error").textContent = "";
  if (sale) {
    // One sale at a time: a second scan while the first has no answer is refused here,
    // before anything is sent.
    codeField.value = "";
    $("#scan-refused").textContent = t(sale.state === "NETWORK" ? "busy.failed" : "busy.waiting");
    $("#scan-refused").classList.remove("hidden");
    return;
  }
  $("#scan-refused").classList.add("hidden");
  const orderNo = $("#order-no").value.trim();
  const amountText = $("#amount").value.trim();
  const amount = amountText === "" ? null : fenOf(amountText);
  if (orderNo !== "" && !validId(orderNo)) { $("#sale-error").textContent = t("sale.bad-order"); $("#order-no").focus(); return; }
  if ((orderNo === "" && amount === null) || (amountText !== "" && amount === null)) {
    $("#sale-error").textContent = t("sale.need-amount");
    $("#amount").focus();
    return;
  }
  if (code === "") { focusScan(); return; }
  codeField.value = "";
  const channel = codeChannel(code);
  if (!channel) {
    shown = { state: "INVALID", tail: code.slice(-4) };
    drawResult();
    focusScan();
    return;
  }
  const body = { auth_code: code, store_id: settings.store || undefined, till_id: settings.till };
  if (orderNo !== "") body.order_no = orderNo;
  if (amount !== null) body.amount = amount;
  const description = $("#description").value.trim();
  if (description !== "" && orderNo === "") body.description = description;
  sale = { key: randomKey(), body, channel, started: Date.now(), state: "WAITING" };
  send(sale);
}

// send asks the API for the sale's money, under the sale's key: the first time, and again
// on every retry.
async function send(s) {
  s.state = "WAITING";
  s.error = null;
  shown = s;
  drawBusy();
  drawResult();
  startTicker();
  let r;
  try {
    r = await posCall("/v1/pos/payments", { method: "POST", body: s.body, headers: { "Idempotency-Key": s.key } });
  } catch (e) {
    if (sale !== s) return;
    s.error = e;
    if (!e.status || e.status >= 500 || e.status === 429) {
      // No answer, or "not now": the payment may have gone through. Only the same key may
      // ask again.
      s.state = "NETWORK";
      stopTicker();
      drawResult();
      return;
    }
    // The API refused the request (400 EINVALID, 401, 404, 409, 422): nothing was taken,
    // and the sale is over; the next scan is a new sale.
    s.state = "ERROR";
    endSale(false);
    if (e.status === 401) showSetup(t("setup.refused"));
    return;
  }
  if (sale === s) answered(s, r);
}

// answered shows the API's answer about the sale; an UNKNOWN one is asked about again
// every poll_after_seconds until it is final.
function answered(s, r) {
  s.result = r;
  s.state = r.status;
  if (FINAL.includes(r.status)) {
    endSale(r.status === "PAID");
    return;
  }
  drawResult();
  if (!s.listed) { s.listed = true; loadList(); } // the list shows it waiting too
  clearTimeout(pollTimer);
  pollTimer = setTimeout(() => poll(s), Math.max(1, r.poll_after_seconds || 5) * 1000);
}

async function poll(s) {
  if (sale !== s) return;
  try {
    const r = await posCall("/v1/pos/payments/" + encodeURIComponent(s.result.pos_payment_no), { timeout: 20000 });
    if (sale === s) answered(s, r);
  } catch (e) {
    if (sale !== s) return;
    s.error = e; // shown under the result; the till keeps asking
    drawResult();
    pollTimer = setTimeout(() => poll(s), 5000);
  }
}

// endSale frees the till for the next sale: the result stays on the screen, the list is
// read again, and the scan field is ready. A paid sale clears the sale's fields; a refused
// one keeps them, for a fresh code or another card.
function endSale(paid) {
  sale = null;
  stopTicker();
  clearTimeout(pollTimer);
  if (paid) for (const id of ["#amount", "#order-no", "#description"]) $(id).value = "";
  $("#scan-refused").classList.add("hidden");
  drawBusy();
  drawResult();
  loadList();
  focusScan();
}

function retry() {
  if (sale && sale.state === "NETWORK") send(sale);
  focusScan();
}

function abandon() {
  if (!sale || sale.state !== "NETWORK" || !confirm(t("abandon.confirm"))) return;
  sale = null;
  shown = null;
  drawBusy();
  drawResult();
  loadList();
  focusScan();
}

function startTicker() {
  stopTicker();
  ticker = setInterval(drawElapsed, 1000);
}

function stopTicker() { clearInterval(ticker); ticker = null; }

function drawElapsed() {
  const e = $("#elapsed");
  const waiting = shown && shown === sale && (sale.state === "WAITING" || sale.state === "UNKNOWN");
  e.classList.toggle("hidden", !waiting);
  if (!waiting) return;
  const secs = Math.floor((Date.now() - sale.started) / 1000);
  e.dataset.seconds = String(secs);
  e.textContent = t("r.elapsed", secs);
}

// drawBusy locks the sale's fields while a sale has no final answer (the scan field stays
// open, to catch and refuse a second scan).
function drawBusy() {
  for (const id of ["#amount", "#order-no", "#description"]) $(id).readOnly = Boolean(sale);
  $("#charge").classList.toggle("busy", Boolean(sale));
  $("#settings").disabled = Boolean(sale);
  document.body.dataset.busy = sale ? "1" : "";
}

function channelWord(ch) { return ch === "alipay" || ch === "wechat" ? t(ch) : ch || ""; }

// drawResult shows what became of the last sale, in the page's language.
function drawResult() {
  const box = $("#result");
  if (!shown) { box.classList.add("hidden"); box.dataset.status = ""; return; }
  const s = shown, r = s.result;
  const state = s.state;
  box.classList.remove("hidden");
  box.dataset.status = state;
  let title = t("r." + state), message = "", detail = [];
  switch (state) {
    case "WAITING":
      title = t("r.waiting");
      message = t("r.waiting-help");
      break;
    case "PAID":
      // The money taken, large: what the cashier reads out.
      message = money(r.amount) + " · " + channelWord(r.channel);
      break;
    case "REFUSED": case "CANCELLED": case "UNKNOWN":
      message = lang === "zh" ? r.message_zh : r.message;
      if (state === "UNKNOWN") detail.push(t("r.unknown-poll", r.poll_after_seconds || 5));
      break;
    case "NETWORK":
      message = t("r.network-help");
      break;
    case "ERROR":
      message = (s.error.code ? s.error.code + ": " : "") + s.error.message;
      detail.push(t("r.error-help"));
      break;
    case "INVALID":
      message = t("r.invalid-help");
      detail.push(t("r.tail") + s.tail);
      break;
  }
  if (r) {
    // A paid sale's amount and channel are its message; the others say them here.
    const what = state === "PAID" ? r.order_no ? t("r.for-order", r.order_no) : r.description || "" :
      money(r.amount) + " · " + channelWord(r.channel) + (r.order_no ? " · " + t("r.for-order", r.order_no) : "");
    detail.unshift(what, t("r.no") + " " + r.pos_payment_no + " · " + t("r.tail") + r.code_tail);
  } else if (s.body) {
    detail.unshift((s.body.amount ? money(s.body.amount) + " · " : "") + channelWord(s.channel) +
      (s.body.order_no ? " · " + t("r.for-order", s.body.order_no) : "") + " · " + t("r.tail") + s.body.auth_code.slice(-4));
  }
  if (s.error && state !== "ERROR") detail.push((s.error.code ? s.error.code + ": " : "") + s.error.message);
  $("#result-title").textContent = title;
  $("#result-message").textContent = message;
  $("#result-detail").replaceChildren(...detail.filter((d) => d).map((d) => el("span", {}, d)));
  $("#retry").classList.toggle("hidden", state !== "NETWORK");
  $("#abandon").classList.toggle("hidden", state !== "NETWORK");
  drawElapsed();
}

// ---- the till's last payments ----

async function loadList() {
  clearTimeout(listTimer);
  if (!settings) return;
  const s = settings;
  let list;
  try {
    list = (await posCall("/v1/pos/payments?limit=20&till_id=" + encodeURIComponent(s.till), { timeout: 20000 })).payments || [];
  } catch (e) {
    if (settings === s) $("#recent-error").textContent = (e.code ? e.code + ": " : "") + e.message;
    return;
  }
  if (settings !== s) return;
  $("#recent-error").textContent = "";
  drawList(list);
  // A payment still waiting for its buyer is shown as it comes to its end (the sale in
  // progress is polled by itself, and the list is read again when it ends).
  if (!sale && list.some((p) => p.status === "UNKNOWN")) listTimer = setTimeout(loadList, 5000);
}

let lastList = [];

function timeOf(s) {
  const d = new Date(s), now = new Date();
  if (d.toDateString() !== now.toDateString()) return when(s);
  return d.toLocaleTimeString(lang === "zh" ? "zh-CN" : "en-GB", { hour12: false });
}

function drawList(list) {
  lastList = list;
  const body = $("#payments tbody");
  body.replaceChildren(...list.map((p) => el("tr", { dataset: { no: p.pos_payment_no, status: p.status } },
    el("td", { class: "time" }, timeOf(p.created_at)),
    el("td", { class: "num amount" }, money(p.amount),
      p.order_no || p.description ? el("div", { class: "muted small" }, p.order_no ? t("r.for-order", p.order_no) : p.description) : ""),
    el("td", {}, el("span", { class: "status " + p.status, dataset: { status: p.status }, title: lang === "zh" ? p.message_zh : p.message }, t("s." + p.status)),
      el("div", { class: "muted small channel-inline" }, channelWord(p.channel))),
    el("td", { class: "channel" }, channelWord(p.channel)),
    el("td", { class: "tail" }, "…" + p.code_tail))));
  if (list.length === 0) body.append(el("tr", {}, el("td", { colSpan: 5, class: "muted" }, t("recent.none"))));
}

// ---- wiring ----

function init() {
  $("#lang").addEventListener("click", () => setLang(lang === "zh" ? "en" : "zh"));
  onLang(() => {
    if (settings) $("#set-key").placeholder = t("setup.keep");
    drawWho();
    drawResult();
    drawList(lastList);
  });
  $("#settings").addEventListener("click", () => { if (!sale) showSetup(); });
  $("#setup-form").addEventListener("submit", saveSetup);
  $("#set-cancel").addEventListener("click", () => { if (settings) showTill(); });
  $("#set-forget").addEventListener("click", forgetSetup);
  // Enter in any field of the sale (a scanner's Enter in the scan field, above all) and the
  // charge button take the sale; the form itself never submits.
  $("#sale-form").addEventListener("submit", (e) => { e.preventDefault(); go(); });
  $("#refresh").addEventListener("click", () => { loadList(); focusScan(); });
  $("#retry").addEventListener("click", retry);
  $("#abandon").addEventListener("click", abandon);
  $("#code").addEventListener("blur", keepFocus);
  document.addEventListener("click", keepFocus);
  // A digit typed with nothing focused (a scan after a click on the page) goes to the scan field.
  document.addEventListener("keydown", (e) => {
    if (document.activeElement === document.body && /^[0-9]$/.test(e.key)) focusScan();
  }, true);
  if (settings) showTill(); else showSetup();
}

init();
