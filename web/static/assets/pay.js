// The pay page: the QR code (drawn by the server), the countdown set by the server's clock,
// and the status pushed by server-sent events, or polled if they do not work. The page
// turns to "paid" by itself: the server's stream asks the channel while the order waits,
// so even a payment whose notification was lost shows up within seconds.
"use strict";

const orderNo = decodeURIComponent(location.pathname.split("/").pop());
const orderURL = "/v1/orders/" + encodeURIComponent(orderNo);
let order = null;
let offsetMs = 0; // server clock − this browser's clock, from the last message
let stopStream = null, pollTimer = null;

// countdown writes seconds left as seed 000 does (orderpay.Countdown).
function countdown(s) {
  const p = (n) => String(n).padStart(2, "0");
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return d > 0 ? p(d) + "天" + p(h) + "小时" + p(m) + "分钟" : p(h) + "小时" + p(m) + "分钟" + p(sec) + "秒";
}

function update(o) {
  order = o;
  // The deadline is the server's; so is "now", corrected by the offset the server just told.
  offsetMs = Date.parse(o.server_time) - Date.now();
  $("#status-box").replaceChildren(statusBadge(o.status));
  $("#amount").textContent = money(o.payable);
  $("#deadline").textContent = "until " + fmtTime(o.pay_deadline) + " (server time)";
  tick();
  if (o.status !== "PENDING_PAYMENT") finish(o);
}

function tick() {
  if (!order) return;
  const c = $("#countdown");
  if (order.status !== "PENDING_PAYMENT") {
    c.textContent = "–";
    return;
  }
  const left = Math.max(0, Math.floor((Date.parse(order.pay_deadline) - (Date.now() + offsetMs)) / 1000));
  c.textContent = countdown(left);
  c.dataset.seconds = left;
  c.dataset.offsetMs = Math.round(offsetMs);
}

function finish(o) {
  stopLive();
  $("#choose").classList.add("hidden");
  $("#qr").classList.add("hidden");
  $("#done").classList.remove("hidden");
  const banner = $("#banner");
  const paid = o.status !== "CANCELLED";
  banner.textContent = paid ? "Paid ✓" : "Cancelled";
  banner.className = "banner" + (paid ? "" : " cancelled");
  $("#cancel").disabled = true;
  $("#transport").textContent = "";
}

function stopLive() {
  if (stopStream) { stopStream(); stopStream = null; }
  if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
}

function live() {
  stopStream = openEvents(orderURL + "/events", (name, data) => {
    if (name !== "order") return;
    $("#transport").textContent = "(live)";
    $("#transport").dataset.transport = "sse";
    update(JSON.parse(data));
  }, () => {
    // The stream could not go on (refused past a cap, or a proxy that buffers): ask.
    stopStream = null;
    if (order && order.status === "PENDING_PAYMENT" && !pollTimer) poll();
  });
}

function poll() {
  $("#transport").textContent = "(polling)";
  $("#transport").dataset.transport = "poll";
  pollTimer = setInterval(async () => {
    try { update(await api(orderURL)); } catch (e) { $("#error").textContent = e.message; }
  }, 2000);
}

async function pay(channel) {
  $("#error").textContent = "";
  for (const b of document.querySelectorAll("#choose button")) b.disabled = true;
  try {
    const res = await api(orderURL + "/pay", { method: "POST", body: { channel }, headers: { "X-Buyer-Id": buyerId() } });
    sessionStorage.setItem("orderpay.pay." + orderNo, channel);
    await setImage($("#qr-img"), orderURL + "/qr.png?channel=" + encodeURIComponent(res.channel) + "&t=" + Date.now());
    $("#qr-text").textContent = res.qr_code;
    $("#qr-channel").textContent = res.channel === "wechat" ? "WeChat" : "Alipay";
    $("#choose").classList.add("hidden");
    $("#qr").classList.remove("hidden");
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
  $("#top").replaceWith(buyerHeader(""));
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
  $("#choose").classList.remove("hidden");
  // Asking again for the same channel returns the same code: a reload shows it again.
  const chosen = sessionStorage.getItem("orderpay.pay." + orderNo);
  if (chosen) pay(chosen);
  live();
  setInterval(tick, 250);
}

document.addEventListener("DOMContentLoaded", load);
