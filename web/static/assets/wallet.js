// The simulator's wallet: pay or decline a code, and switch the channel's faults on and off.
"use strict";

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
      " " + res.channel + " " + res.out_trade_no + " " + money(res.amount));
  } catch (e) {
    $("#error").textContent = e.message;
  }
  loadPending();
}

async function loadPending() {
  const res = await api("/sim/pending");
  const body = $("#pending tbody");
  body.replaceChildren(...res.pending.map((p) => el("tr", {},
    el("td", {}, p.channel), el("td", {}, p.out_trade_no), el("td", {}, p.subject), el("td", { class: "num" }, money(p.amount)),
    el("td", {}, fmtTime(p.expires_at)),
    el("td", {}, el("button", { class: "secondary", dataset: { pick: p.out_trade_no }, onclick: () => { $("#qr-code").value = p.qr_code; } }, "Pick")))));
  if (res.pending.length === 0) body.append(el("tr", {}, el("td", { colSpan: 6, class: "muted" }, "no trades waiting for payment")));
}

document.addEventListener("DOMContentLoaded", () => {
  $("#top").replaceWith(el("header", {}, el("span", { class: "brand" }, "channel simulator — wallet")));
  $("#pay").addEventListener("click", () => act("pay"));
  $("#scan").addEventListener("click", () => act("scan"));
  $("#decline").addEventListener("click", () => act("decline"));
  loadPending().catch((e) => { $("#error").textContent = e.message; });
  loadFaults().catch((e) => { $("#error").textContent = e.message; });
});
