// The pay page: the QR code (drawn by the server), the countdown set by the server's clock,
// and the status pushed by server-sent events, or polled if they do not work. The page
// turns to "paid" by itself: the server's stream asks the channel while the order waits,
// so even a payment whose notification was lost shows up within seconds. Once the order is
// paid or cancelled the countdown stops and the cancel button goes.
"use strict";

const orderNo = decodeURIComponent(location.pathname.split("/").pop());
const orderURL = "/v1/orders/" + encodeURIComponent(orderNo);
let order = null;
let attempt = null; // the QR code shown: {channel, qr_code}
let offsetMs = 0; // server clock − this browser's clock, from the last message
let stopStream = null, pollTimer = null, tickTimer = null;
let transport = ""; // "sse" or "poll"

function update(o) {
  order = o;
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
  if (attempt) $("#scan-with").replaceChildren(...t("scan-with", el("span", { id: "qr-channel" }, t(attempt.channel))));
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
}

// finish shows the end: paid or cancelled. Nothing counts down any more, and there is
// nothing left to cancel.
function finish() {
  stopLive();
  if (tickTimer) { clearInterval(tickTimer); tickTimer = null; }
  $("#choose").classList.add("hidden");
  $("#qr").classList.add("hidden");
  $("#done").classList.remove("hidden");
  $("#countdown-box").classList.add("hidden");
  $("#countdown").textContent = "–";
  delete $("#countdown").dataset.seconds;
  $("#cancel").classList.add("hidden");
  transport = "";
  drawStatus();
}

function stopLive() {
  if (stopStream) { stopStream(); stopStream = null; }
  if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
}

function live() {
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

function poll() {
  transport = "poll";
  $("#transport").dataset.transport = "poll";
  drawStatus();
  pollTimer = setInterval(async () => {
    try { update(await api(orderURL)); } catch (e) { $("#error").textContent = e.message; }
  }, 2000);
}

// showQR shows an attempt's code: the image the server draws, and the code as text.
async function showQR(a) {
  await setImage($("#qr-img"), orderURL + "/qr.png?channel=" + encodeURIComponent(a.channel) + "&t=" + Date.now());
  if (order.status !== "PENDING_PAYMENT") return; // paid or cancelled meanwhile
  attempt = a;
  $("#qr-text").textContent = a.qr_code;
  drawStatus();
  $("#choose").classList.add("hidden");
  $("#qr").classList.remove("hidden");
}

async function pay(channel) {
  $("#error").textContent = "";
  for (const b of document.querySelectorAll("#choose button")) b.disabled = true;
  try {
    await showQR(await api(orderURL + "/pay", { method: "POST", body: { channel }, headers: { "X-Buyer-Id": buyerId() } }));
  } catch (e) {
    $("#error").textContent = e.message;
    for (const b of document.querySelectorAll("#choose button")) b.disabled = false;
  }
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
  onLang(() => { if (order) { drawStatus(); tick(); } });
  $("#order-no").textContent = orderNo;
  $("#detail-link").href = "/orders/" + encodeURIComponent(orderNo);
  $("#cancel").addEventListener("click", cancel);
  for (const b of document.querySelectorAll("#choose button")) b.addEventListener("click", () => pay(b.dataset.channel));
  let o;
  try {
    o = await api(orderURL);
  } catch (e) {
    $("#error").textContent = e.message;
    return;
  }
  update(o);
  if (o.status !== "PENDING_PAYMENT") return;
  tickTimer = setInterval(tick, 250);
  live();
  // The order names the code the buyer was given and can still pay: opened again, the
  // page shows that one rather than asking for another.
  if (o.open_attempt) {
    try {
      await showQR(o.open_attempt);
      return;
    } catch (e) {
      $("#error").textContent = e.message;
    }
  }
  if (order.status === "PENDING_PAYMENT") $("#choose").classList.remove("hidden");
}

document.addEventListener("DOMContentLoaded", load);
