// The pay page: a cashier that offers the ways to pay that fit the device (docs/pages.md),
// the countdown set by the server's clock, and the status pushed by server-sent events, or
// polled. On a desktop: each wallet's QR code, Alipay's web cashier, and the single code
// either wallet can scan; in a phone's browser: Alipay's and WeChat Pay's mobile cashiers;
// inside WeChat: WeChat Pay (JSAPI); inside Alipay: Alipay in the app, or its mobile
// cashier. Given a queue ticket's id instead of an order number, the page is the ticket's
// (queue.js) until its order is made, then this order's. The page does with each instruction what its kind says (docs/api.md, "What the
// device is handed"), and whatever the wallet or a returning cashier says, only the order's
// status, which the server asks the channel for, turns the page to paid.
"use strict";

Object.assign(STRINGS.en, CASHIER_STRINGS.en);
Object.assign(STRINGS.zh, CASHIER_STRINGS.zh);
applyStatic();

const orderNo = decodeURIComponent(location.pathname.split("/")[2] || "");
const orderURL = "/v1/orders/" + encodeURIComponent(orderNo);
// awayKey marks, in this tab, that the page sent the buyer to a cashier; thenKey, the way
// to pay the page goes on with once a wallet's OAuth brings the buyer back.
const awayKey = "orderpay.away." + orderNo, thenKey = "orderpay.then." + orderNo;
const device = deviceOf(navigator.userAgent);
let order = null;
// scan is the scan session the server read this page's requests with (the single code:
// {wallet, identified, expires_at}), or null for the order's own buyer.
let scan = null;
let codes = []; // the channels whose QR codes are shown, in their order on the page
let pending = null; // the instruction the page offers to go on with: {channel, method, pay}
let checkingSince = 0; // when the page started to check a payment the buyer may have made
let returnSaid = false; // the channel's signed return said the buyer paid (words only)
let offsetMs = 0; // server clock − this browser's clock, from the last message
let stopStream = null, pollTimer = null, tickTimer = null, oneTimer = null;
let transport = ""; // "sse" or "poll"

// deviceOf is where the page runs, by its User-Agent: inside WeChat, inside Alipay, a
// phone's browser, or a desktop's.
function deviceOf(ua) {
  if (/MicroMessenger/i.test(ua)) return "wechat";
  if (/AlipayClient/i.test(ua)) return "alipay";
  if (/Mobi|Android|iPhone|iPad|iPod|HarmonyOS/i.test(ua)) return "phone";
  return "desktop";
}

// offered says whether the method button b fits this device and, paying by the single
// code, what the scan session can pay: a method for one wallet user only when that wallet
// vouched for the scanner, and no QR code (the scanner is the phone).
function offered(b) {
  if (!b.dataset.device.split(" ").includes(device)) return false;
  const m = b.dataset.method, ch = b.dataset.channel;
  if (scan && m === "qr") return false;
  if (scan && (m === "jsapi" || m === "inapp")) return scan.identified && scan.wallet === ch;
  return true;
}

function update(o) {
  order = o;
  if (o.scan) scan = o.scan;
  // The deadline is the server's; so is "now", corrected by the offset the server just told.
  offsetMs = Date.parse(o.server_time) - Date.now();
  drawStatus();
  $("#amount").textContent = money(o.payable);
  tick();
  if (o.status !== "PENDING_PAYMENT") finish();
}

// drawStatus writes what depends on the order and the language.
function drawStatus() {
  const o = order;
  $("#status-box").replaceChildren(badge("order", o.status, { id: "status" }));
  $("#deadline").textContent = t("until", when(o.pay_deadline));
  $("#transport").textContent = transport === "sse" ? t("live") : transport === "poll" ? t("polling") : "";
  $("#choose-hint").textContent = t("hint." + device);
  if (codes[0]) $("#scan-with").replaceChildren(...t("scan-with", el("span", { id: "qr-channel" }, t(codes[0]))));
  if (codes[1]) $("#scan-with-2").replaceChildren(...t("scan-with", el("span", { class: "qr-channel" }, t(codes[1]))));
  drawNext();
  drawChecking();
  if (o.status !== "PENDING_PAYMENT") {
    const paid = o.status !== "CANCELLED";
    $("#banner").textContent = paid ? t("banner.paid") : t("banner.cancelled");
    $("#banner").className = "banner" + (paid ? "" : " cancelled");
  }
}

function tick() {
  if (!order || order.status !== "PENDING_PAYMENT") return;
  const c = $("#countdown");
  const left = Math.max(0, Math.floor((Date.parse(order.pay_deadline) - (Date.now() + offsetMs)) / 1000));
  c.textContent = countdown(left);
  c.dataset.seconds = left;
  c.dataset.offsetMs = Math.round(offsetMs);
  drawChecking();
}

// finish shows the end: paid or cancelled. Nothing counts down any more, and there is
// nothing left to pay or cancel.
function finish() {
  stopLive();
  if (tickTimer) { clearInterval(tickTimer); tickTimer = null; }
  if (oneTimer) { clearTimeout(oneTimer); oneTimer = null; }
  for (const s of ["#choose", "#qr", "#qr2", "#one", "#more", "#next", "#checking"]) $(s).classList.add("hidden");
  $("#done").classList.remove("hidden");
  $("#countdown-box").classList.add("hidden");
  $("#countdown").textContent = "–";
  delete $("#countdown").dataset.seconds;
  $("#cancel").classList.add("hidden");
  sessionStorage.removeItem(awayKey);
  sessionStorage.removeItem(thenKey);
  checkingSince = 0;
  pending = null;
  transport = "";
  drawStatus();
}

function stopLive() {
  if (stopStream) { stopStream(); stopStream = null; }
  if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
}

function live() {
  if (scan) { poll(); return; } // a scan session reads the order only by polling its read
  stopStream = openEvents(orderURL + "/events", (name, data) => {
    if (name !== "order") return;
    transport = "sse";
    $("#transport").dataset.transport = "sse";
    update(JSON.parse(data));
  }, () => {
    // The stream could not go on (refused past a cap, or a proxy that buffers): ask.
    stopStream = null;
    if (order && order.status === "PENDING_PAYMENT" && !pollTimer) poll();
  });
}

// poll reads the order every 2 s; each read asks the channel, as the event stream does.
function poll() {
  transport = "poll";
  $("#transport").dataset.transport = "poll";
  drawStatus();
  pollTimer = setInterval(async () => {
    try {
      update(await buyerRead(orderURL));
    } catch (e) {
      $("#error").textContent = scan && (e.status === 401 || e.status === 404) ? t("scan.ended") : e.message;
    }
  }, 2000);
}

// showQR shows a channel's QR code: the image the server draws, and the code as text. The
// first code shown takes #qr, a second #qr2.
async function showQR(channel, code) {
  if (codes.includes(channel)) return;
  const slot = codes.length === 0 ? "" : "2";
  codes.push(channel);
  try {
    await setImage($("#qr" + slot + "-img"), orderURL + "/qr.png?channel=" + encodeURIComponent(channel) + "&t=" + Date.now());
  } catch (e) {
    codes = codes.filter((c) => c !== channel);
    throw e;
  }
  if (order.status !== "PENDING_PAYMENT") return; // paid or cancelled meanwhile
  $("#qr" + slot + "-text").textContent = code;
  $("#choose").classList.add("hidden");
  $("#qr" + slot).classList.remove("hidden");
  drawMore();
  drawStatus();
}

// drawMore offers, on a desktop once a code is shown, what it has not shown yet: the other
// wallet's code and Alipay's web cashier.
function drawMore() {
  if (device !== "desktop" || scan || codes.length === 0) return;
  $("#more-alipay").classList.toggle("hidden", codes.includes("alipay"));
  $("#more-wechat").classList.toggle("hidden", codes.includes("wechat"));
  $("#more").classList.remove("hidden");
}

// oneCode reads the order's single code (its image, the URL it holds, when it ends), or
// null where the shop has none.
async function oneCode() {
  const resp = await fetch("/pay/" + encodeURIComponent(orderNo) + "/code.png", { headers: authHeaders() });
  if (!resp.ok) return null;
  return { url: resp.headers.get("X-Orderpay-Code-URL"), expires: Date.parse(resp.headers.get("X-Orderpay-Code-Expires-At")), image: await resp.blob() };
}

// showOneCode shows the single code on a desktop, and draws a new one before it ends.
async function showOneCode() {
  oneTimer = null;
  if (!order || order.status !== "PENDING_PAYMENT") return;
  const c = await oneCode().catch(() => null);
  if (!c || !order || order.status !== "PENDING_PAYMENT") { $("#one").classList.add("hidden"); return; }
  const img = $("#one-img");
  if (img.src.startsWith("blob:")) URL.revokeObjectURL(img.src);
  img.src = URL.createObjectURL(c.image);
  $("#one-url").textContent = c.url;
  $("#one").classList.remove("hidden");
  oneTimer = setTimeout(showOneCode, Math.max(10000, c.expires - Date.now() - 60000));
}

function setBusy(busy) {
  for (const b of document.querySelectorAll("#choose button, #more button, #next button")) b.disabled = busy;
}

// pay asks for an instruction of channel's method and follows it. A method for one wallet
// user needs that wallet to vouch for the payer: without a scan session the page first goes
// through the single code, whose OAuth brings the buyer back here to go on.
async function pay(channel, method) {
  $("#error").textContent = "";
  setBusy(true);
  try {
    if ((method === "jsapi" || method === "inapp") && !(scan && scan.identified && scan.wallet === channel)) {
      const c = await oneCode().catch(() => null);
      if (c) {
        sessionStorage.setItem(thenKey, channel + " " + method);
        location.assign(c.url);
        return;
      }
    }
    const p = await api(orderURL + "/pay", { method: "POST", body: { channel, method }, headers: { "X-Buyer-Id": buyerId() } });
    await follow({ channel: p.channel, method: p.method, pay: p.pay, qr_code: p.qr_code }, true);
  } catch (e) {
    $("#error").textContent = e.message;
  } finally {
    setBusy(false);
  }
}

// follow takes an attempt's instruction: a code is shown; any other is offered to go on
// with, and, when act, followed at once.
async function follow(a, act) {
  const p = a.pay || (a.qr_code ? { kind: "qr", code: a.qr_code } : null);
  if (!p) return;
  if (p.kind === "qr") {
    await showQR(a.channel, p.code || a.qr_code);
    return;
  }
  pending = { channel: a.channel, method: a.method, pay: p };
  drawNext();
  if (act) go();
}

// drawNext shows the instruction the page can go on with, where this device can: WeChat's
// bridge is only inside WeChat, Alipay's only inside Alipay.
function drawNext() {
  const kind = pending && pending.pay.kind;
  const fits = pending && (kind === "jsapi" ? device === "wechat" : kind === "inapp" ? device === "alipay" : true);
  if (!fits || !order || order.status !== "PENDING_PAYMENT") { $("#next").classList.add("hidden"); return; }
  const ch = el("strong", {}, t(pending.channel));
  const words = kind === "redirect" || kind === "form" ? t("next.page", ch) : kind === "app" ? t("next.app", ch) : t("next.wallet", ch);
  $("#next-text").replaceChildren(...words);
  $("#next-go").classList.toggle("hidden", kind === "app");
  $("#next").classList.remove("hidden");
}

// go does what the pending instruction's kind says: opens the cashier's page (redirect),
// submits Alipay's form (form), or hands the fields to the wallet's own API (jsapi,
// inapp). An app instruction is for the shop's own app: the page says so.
function go() {
  const p = pending.pay;
  $("#error").textContent = "";
  switch (p.kind) {
    case "redirect":
      leave();
      navigate(p.url);
      break;
    case "form":
      leave();
      submitForm(p);
      break;
    case "jsapi":
      payInWechat(p);
      break;
    case "inapp":
      payInAlipay(p);
      break;
  }
}

// leave remembers, in this tab, that the buyer went to a cashier: back on this page, it
// checks the payment.
function leave() {
  sessionStorage.setItem(awayKey, String(Date.now()));
  $("#next-text").textContent = t("going");
}

// navigate opens url in this tab. The cashier learns the page's origin, no more (WeChat's
// H5 cashier checks that the buyer comes from the shop's registered domain).
function navigate(url) {
  const a = el("a", { href: url, referrerPolicy: "origin", class: "hidden" });
  document.body.append(a);
  a.click();
}

// submitForm posts Alipay's form: the html's form, rebuilt from its action, method and
// fields (its script is never run), or, if it has none, the url that carries the same order.
function submitForm(p) {
  const src = new DOMParser().parseFromString(p.html || "", "text/html").querySelector("form[action]");
  if (!src) { navigate(p.url); return; }
  const f = el("form", { action: new URL(src.getAttribute("action"), p.url).href, method: src.getAttribute("method") || "post", class: "hidden" },
    Array.from(src.querySelectorAll("input[name]"), (i) => el("input", { type: "hidden", name: i.name, value: i.value })));
  document.body.append(f);
  f.submit();
}

// payInWechat hands the six fields to WeChat's getBrandWCPayRequest, once the bridge is
// there. What WeChat answers only decides what the page says: the order's status decides
// whether it is paid.
function payInWechat(p) {
  const fields = { appId: p.appId, timeStamp: p.timeStamp, nonceStr: p.nonceStr, package: p.package, signType: p.signType, paySign: p.paySign };
  const invoke = () => window.WeixinJSBridge.invoke("getBrandWCPayRequest", fields, (res) => walletSaid(String((res && res.err_msg) || ""), ":ok", ":cancel"));
  if (window.WeixinJSBridge && window.WeixinJSBridge.invoke) invoke();
  else if (device === "wechat") document.addEventListener("WeixinJSBridgeReady", invoke, { once: true });
  else $("#error").textContent = t("need.wechat");
}

// payInAlipay hands the trade to Alipay's tradePay (my.tradePay, or AlipayJSBridge's).
function payInAlipay(p) {
  const said = (res) => walletSaid(String((res && res.resultCode) || ""), "9000", "6001");
  if (window.my && typeof window.my.tradePay === "function") window.my.tradePay({ tradeNO: p.trade_no, success: said, fail: said });
  else if (window.AlipayJSBridge) window.AlipayJSBridge.call("tradePay", { tradeNO: p.trade_no }, said);
  else $("#error").textContent = t("need.alipay");
}

// walletSaid shows what the wallet answered: paid (the page then checks the order),
// given up, or a refusal in the wallet's words. It never marks anything paid.
function walletSaid(answer, ok, cancelled) {
  if (answer.endsWith(ok)) startChecking();
  else if (answer.endsWith(cancelled)) $("#error").textContent = t("wallet.cancel");
  else $("#error").textContent = t("wallet.fail", answer || "?");
}

async function checkReturn(query) {
  try {
    const r = await api(orderURL + "/return", { method: "POST", headers: { "X-Buyer-Id": buyerId() }, body: { query } });
    returnSaid = r.verified;
    drawChecking();
    if (r.status !== "PENDING_PAYMENT") update(await buyerRead(orderURL));
  } catch (e) {
    // The page checks by the order's status anyway.
  }
}

function startChecking() {
  if (!checkingSince) checkingSince = Date.now();
  drawChecking();
}

// drawChecking says the page is checking the payment; after 20 s without it, that nothing
// is paid yet and the buyer can choose again.
function drawChecking() {
  const c = $("#checking");
  if (!checkingSince || !order || order.status !== "PENDING_PAYMENT") { c.classList.add("hidden"); return; }
  const long = Date.now() - checkingSince > 20000;
  c.textContent = t(long ? "checking.long" : returnSaid ? "checking.said" : "checking");
  c.dataset.state = long ? "waiting" : "checking";
  c.classList.remove("hidden");
}

// showChoices shows the ways to pay this device and session have.
function showChoices() {
  let any = false;
  for (const b of document.querySelectorAll("#choose button")) {
    const on = offered(b);
    b.classList.toggle("hidden", !on);
    any = any || on;
  }
  if (scan && !any) $("#error").textContent = t("scan.nowallet");
  if (codes.length === 0) $("#choose").classList.remove("hidden");
}

async function cancel(ev) {
  ev.target.disabled = true;
  try {
    update(await api(orderURL + "/cancel", { method: "POST", headers: { "X-Buyer-Id": buyerId() } }));
  } catch (e) {
    $("#error").textContent = e.message;
    ev.target.disabled = false;
  }
}

async function load() {
  await loadSession();
  showHeader("");
  // A ticket of a queued SKU (queue.js): its place in the queue until its order is made.
  if (isTicketID(orderNo)) { followTicket(orderNo); return; }
  onLang(() => { if (order) { drawStatus(); tick(); } });
  $("#order-no").textContent = orderNo;
  $("#detail-link").href = "/orders/" + encodeURIComponent(orderNo);
  // The button is disabled in the page until here: a click before the session was read
  // went nowhere.
  $("#cancel").addEventListener("click", cancel);
  $("#cancel").disabled = false;
  for (const b of document.querySelectorAll("#choose button, #more button")) b.addEventListener("click", () => pay(b.dataset.channel, b.dataset.method));
  $("#next-go").addEventListener("click", () => { if (pending) go(); });
  // Back from a cashier (Alipay's signed return parameters, or a page this tab left for
  // one): check the payment. The return's parameters are a hint, never applied: the
  // server asks the channel.
  const q = new URLSearchParams(location.search);
  const away = Number(sessionStorage.getItem(awayKey) || 0);
  if (/\.return$/.test(q.get("method") || "") || (q.has("out_trade_no") && q.has("sign")) || (away && Date.now() - away < 30 * 60 * 1000)) startChecking();
  // The server verifies what the return carries (Alipay signs it) and asks the channel
  // once; what it says changes only the words while the page checks.
  if (q.has("sign")) checkReturn(location.search);
  if (location.search) history.replaceState(null, "", location.pathname);
  let o;
  try {
    o = await buyerRead(orderURL);
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  if (o.scan) {
    // Whoever scanned the single code: this order alone, nothing of the buyer's own.
    document.body.classList.add("scan");
    $("#scan-note").classList.remove("hidden");
    for (const s of ["#cancel", "#detail-link"]) $(s).classList.add("hidden");
  }
  update(o);
  if (o.status !== "PENDING_PAYMENT") return;
  tickTimer = setInterval(tick, 250);
  live();
  if (device === "desktop" && !scan) showOneCode();
  // The order names the instruction the buyer was given and can still pay: opened again,
  // the page shows that one rather than asking for another.
  if (o.open_attempt) {
    try {
      await follow(o.open_attempt, false);
    } catch (e) {
      $("#error").textContent = e.message;
    }
  }
  if (order.status !== "PENDING_PAYMENT") return;
  showChoices();
  drawMore();
  // Back from a wallet's OAuth that the page went through to pay by a method for one
  // wallet user: go on with it.
  const then = (sessionStorage.getItem(thenKey) || "").split(" ");
  sessionStorage.removeItem(thenKey);
  if (then.length === 2 && scan && scan.identified && scan.wallet === then[0] && !pending) pay(then[0], then[1]);
}

document.addEventListener("DOMContentLoaded", load);
