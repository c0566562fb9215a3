// The simulator's wallet: pay or decline a code, or an instruction of any way to pay on
// the device it was handed to, and switch the channel's faults on and off.
"use strict";

// userAgents are the devices' browsers, as the wallets tell them apart: WeChat's and
// Alipay's in-app browsers name themselves (MicroMessenger, AlipayClient).
const userAgents = {
  phone: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
  wechat: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0.49 NetType/WIFI Language/zh_CN",
  alipay: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 AlipayClient/10.6.18.6000 Language/zh-Hans",
  desktop: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36",
};

// instructionOf reads the pasted instruction: the pay object, or a whole pay answer that
// holds one under "pay".
function instructionOf(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (_) {
    throw new Error("the instruction is not JSON: paste the pay object {\"kind\", \"channel\", \"method\", …}");
  }
  const pay = v && typeof v.pay === "object" && v.pay !== null ? v.pay : v;
  if (!pay || typeof pay !== "object" || !pay.kind || !pay.channel) throw new Error("no pay object: it has kind, channel, method and the fields the device takes");
  return pay;
}

// actInstruction pays (or declines) the pasted instruction as the buyer's wallet on the
// device the form describes (POST /sim/pay with pay). Where the wallet sends the browser
// next (return_url) is offered as a link.
async function actInstruction(action) {
  $("#instruction-error").textContent = "";
  $("#instruction-result").textContent = "";
  let pay;
  try {
    pay = instructionOf($("#pay-json").value.trim());
  } catch (e) {
    $("#instruction-error").textContent = e.message;
    return;
  }
  let referer = $("#referer").value.trim();
  if (!referer && pay.kind === "redirect" && pay.url) {
    // A WeChat H5 link is opened from the shop's pay page, where redirect_url comes back to.
    try { referer = new URL(pay.url).searchParams.get("redirect_url") || ""; } catch (_) { /* not a URL */ }
  }
  try {
    const res = await api("/sim/pay", { method: "POST", body: { pay, action, buyer: $("#buyer").value.trim(), user_agent: $("#user-agent").value.trim(),
      referer, client_ip: $("#client-ip").value.trim() } });
    $("#instruction-result").replaceChildren(el("span", { class: "status " + res.status, id: "instruction-status" }, res.status),
      " " + channelName(res.channel) + " " + res.out_trade_no + " " + money(res.amount),
      res.return_url ? el("span", {}, " · ", el("a", { id: "return-link", href: res.return_url }, "Back to the shop")) : "");
  } catch (e) {
    $("#instruction-error").textContent = e.message;
  }
  loadPending();
}

// The toggles: each is one rule of the simulator's fault plan, for both channels. Rules the
// page does not know (set through the API) are kept as they are.
const toggles = [
  { id: "drop", label: "Drop notifications", rule: { method: "notify", kind: "drop" } },
  { id: "duplicate", label: "Duplicate notifications", rule: { method: "notify", kind: "duplicate" } },
  { id: "forge", label: "Send a forged notification first", rule: { method: "notify", kind: "forge_signature" } },
  { id: "tamper", label: "Send a tampered amount first", rule: { method: "notify", kind: "tamper_amount" } },
  { id: "wrongapp", label: "Send one for another app first", rule: { method: "notify", kind: "wrong_app" } },
  { id: "delay", label: "Delay notifications 30 s", rule: { method: "notify", kind: "delay", delay: "30s" } },
  { id: "query-timeout", label: "Queries time out", rule: { method: "query", kind: "timeout" } },
  { id: "precreate-500", label: "Precreate answers HTTP 500", rule: { method: "precreate", kind: "http_500" } },
];

const same = (a, b) => (a.channel || "") === "" && a.method === b.method && a.kind === b.kind;

async function loadFaults() {
  const status = await api("/sim/faults");
  const rules = status.rules || [];
  $("#faults").replaceChildren(...toggles.map((t) => {
    const i = rules.findIndex((r) => same(r, t.rule));
    return el("label", { class: "row" }, el("input", { type: "checkbox", id: "fault-" + t.id, checked: i >= 0, onchange: setFaults }),
      t.label, i >= 0 ? el("span", { class: "muted" }, "fired " + (status.fired[i] || 0) + "×") : "");
  }));
}

async function setFaults() {
  const current = (await api("/sim/faults")).rules || [];
  const rules = current.filter((r) => !toggles.some((t) => same(r, t.rule)));
  for (const t of toggles) if ($("#fault-" + t.id).checked) rules.push(t.rule);
  try {
    await api("/sim/faults", { method: "PUT", body: { seed: 1, rules } });
  } catch (e) {
    $("#error").textContent = e.message;
  }
  await loadFaults();
}

async function act(action) {
  $("#error").textContent = "";
  $("#result").textContent = "";
  try {
    const res = await api("/sim/pay", { method: "POST", body: { qr_code: $("#qr-code").value.trim(), action } });
    $("#result").replaceChildren(el("span", { class: "status " + res.status, id: "wallet-status" }, res.status),
      " " + channelName(res.channel) + " " + res.out_trade_no + " " + money(res.amount));
  } catch (e) {
    $("#error").textContent = e.message;
  }
  loadPending();
}

async function loadPending() {
  const res = await api("/sim/pending");
  const body = $("#pending tbody");
  body.replaceChildren(...res.pending.map((p) => el("tr", {},
    el("td", { dataset: { channel: p.channel } }, channelName(p.channel)), el("td", {}, p.out_trade_no), el("td", {}, p.subject), el("td", { class: "num" }, money(p.amount)),
    el("td", {}, fmtTime(p.expires_at)),
    el("td", {}, el("button", { class: "secondary", dataset: { pick: p.out_trade_no }, onclick: () => { $("#qr-code").value = p.qr_code; } }, "Pick")))));
  if (res.pending.length === 0) body.append(el("tr", {}, el("td", { colSpan: 6, class: "muted" }, "no trades waiting for payment")));
}

document.addEventListener("DOMContentLoaded", () => {
  $("#top").replaceWith(el("header", {}, el("span", { class: "brand" }, "channel simulator — wallet")));
  $("#pay").addEventListener("click", () => act("pay"));
  $("#scan").addEventListener("click", () => act("scan"));
  $("#decline").addEventListener("click", () => act("decline"));
  $("#device").addEventListener("change", () => { $("#user-agent").value = userAgents[$("#device").value]; });
  $("#user-agent").value = userAgents[$("#device").value];
  $("#pay-instruction").addEventListener("click", () => actInstruction("pay"));
  $("#decline-instruction").addEventListener("click", () => actInstruction("decline"));
  loadPending().catch((e) => { $("#error").textContent = e.message; });
  loadFaults().catch((e) => { $("#error").textContent = e.message; });
});
