// The wallet page's payment codes (付款码): pick a channel and how the buyer will behave,
// show the code as a till scans it (a Code 128 barcode and its digits), and confirm a
// payment the till started while it waits for the buyer. Served by the simulator itself
// (channel/sim) and added to the wallet page after its own scripts; it uses their el, $,
// api, money, fmtTime and channelName.
"use strict";

const codeBehaviours = [
  ["confirm", "confirms at once (no password)"],
  ["password", "types the password after the delay"],
  ["wrong_password", "types a wrong password, then the right one after the delay"],
  ["never", "opens the password dialog and walks away"],
  ["short", "has not enough balance"],
];

// behaviourName is how a behaviour reads in the list of codes.
function behaviourName(b) {
  const found = codeBehaviours.find(([v]) => v === b);
  return found ? found[1] : b;
}

// shownCode is the code on the phone's screen, or "".
let shownCode = "";

function codeSection() {
  const behaviour = el("select", { id: "code-behaviour" }, codeBehaviours.map(([v, label]) => el("option", { value: v }, v + ": " + label)));
  return [
    el("h2", { id: "codes-title" }, "Pay at a till (payment code)"),
    el("div", { class: "card", id: "codes" },
      el("p", { class: "muted" }, "The buyer's payment code (付款码), as a wallet shows it for a till to scan: single use, for two minutes. ",
        "The till sends it with the payment (Alipay alipay.trade.pay, WeChat Pay codepay); the buyer then behaves as chosen here. ",
        "A payment waiting for the buyer can be confirmed below, as if the password were typed now."),
      el("p", { class: "row" },
        el("label", { for: "code-channel" }, "Wallet"),
        el("select", { id: "code-channel" }, el("option", { value: "alipay" }, "Alipay"), el("option", { value: "wechat" }, "WeChat Pay")),
        el("label", { for: "code-buyer" }, "Buyer"), el("input", { id: "code-buyer", value: "alice" })),
      el("p", { class: "row" },
        el("label", { for: "code-behaviour" }, "The buyer"), behaviour,
        el("label", { for: "code-after" }, "after (s)"), el("input", { id: "code-after", type: "number", min: "0", max: "3600", value: "10" })),
      el("div", { class: "row" }, el("button", { id: "code-issue", onclick: issueCode }, "Show a payment code")),
      el("div", { id: "code-shown", class: "hidden" },
        el("p", {}, el("img", { id: "code-barcode", alt: "payment code barcode", width: "360" })),
        el("p", {}, el("code", { id: "code-digits" }), " ", el("span", { class: "muted", id: "code-expires" }))),
      el("p", { id: "code-status" }),
      el("p", { class: "error", id: "code-error" })),
    el("div", { class: "scroll" }, el("table", { id: "codes-table" },
      el("thead", {}, el("tr", {}, ["Wallet", "Code", "Buyer behaves", "Code state", "out_trade_no", "Trade status", "Amount", ""].map((h, i) =>
        el("th", { class: i === 6 ? "num" : undefined }, h)))),
      el("tbody"))),
  ];
}

async function issueCode() {
  $("#code-error").textContent = "";
  try {
    const c = await api("/sim/wallet/codes", { method: "POST", body: {
      channel: $("#code-channel").value, buyer: $("#code-buyer").value.trim(), behaviour: $("#code-behaviour").value,
      after_seconds: Number($("#code-after").value) || 0 } });
    shownCode = c.auth_code;
    $("#code-barcode").src = "/sim/wallet/codes/" + encodeURIComponent(c.auth_code) + "/barcode.svg";
    $("#code-digits").textContent = c.auth_code;
    $("#code-expires").textContent = "valid until " + fmtTime(c.expires_at);
    $("#code-shown").classList.remove("hidden");
  } catch (e) {
    $("#code-error").textContent = e.message;
  }
  loadCodes();
}

async function confirmCode(code) {
  $("#code-error").textContent = "";
  try {
    const res = await api("/sim/wallet/codes/" + encodeURIComponent(code) + "/confirm", { method: "POST" });
    $("#code-status").replaceChildren("Confirmed: ", el("span", { class: statusClass(res.status) }, res.status), " " + res.out_trade_no + " " + money(res.amount));
  } catch (e) {
    $("#code-error").textContent = e.message;
  }
  loadCodes();
}

// statusClass styles a channel's trade status as the page styles an order's: paid green,
// ended unpaid red.
function statusClass(status) {
  const paid = ["SUCCESS", "TRADE_SUCCESS", "TRADE_FINISHED"].includes(status);
  const ended = ["TRADE_CLOSED", "CLOSED", "PAYERROR", "REVOKED"].includes(status);
  return "status " + status + (paid ? " SUCCESS" : ended ? " CLOSED" : "");
}

function confirmButton(c) {
  return c.waiting ? el("button", { class: "secondary", dataset: { confirm: c.auth_code }, onclick: () => confirmCode(c.auth_code) }, "Confirm") : "";
}

async function loadCodes() {
  let res;
  try {
    res = await api("/sim/wallet/codes");
  } catch (e) {
    $("#code-error").textContent = e.message;
    return;
  }
  const body = $("#codes-table tbody");
  body.replaceChildren(...res.codes.map((c) => el("tr", {},
    el("td", { dataset: { channel: c.channel } }, channelName(c.channel)), el("td", {}, el("code", {}, c.auth_code)),
    el("td", { dataset: { behaviour: c.behaviour } }, behaviourName(c.behaviour)), el("td", {}, c.state),
    el("td", {}, c.out_trade_no || ""), el("td", {}, c.trade_status ? el("span", { class: statusClass(c.trade_status) }, c.trade_status) : ""),
    el("td", { class: "num" }, c.amount ? money(c.amount) : ""), el("td", {}, confirmButton(c)))));
  if (res.codes.length === 0) body.append(el("tr", {}, el("td", { colSpan: 8, class: "muted" }, "no payment codes shown yet")));
  const shown = res.codes.find((c) => c.auth_code === shownCode);
  if (shown) {
    $("#code-status").replaceChildren(
      shown.state === "used" ? "Scanned by a till" + (shown.out_trade_no ? ": " + shown.out_trade_no + " " + money(shown.amount) + " " : " (refused) ") : "Code " + shown.state + " ",
      shown.trade_status ? el("span", { class: statusClass(shown.trade_status), id: "code-trade-status" }, shown.trade_status) : "",
      shown.waiting ? el("span", {}, " waiting for the buyer ", el("button", { id: "code-confirm", onclick: () => confirmCode(shown.auth_code) }, "Confirm")) : "");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  // Before the pending trades' heading.
  const anchor = $("#pending-title");
  const parts = codeSection();
  if (anchor) anchor.before(...parts);
  else $("main").append(...parts);
  loadCodes();
  setInterval(loadCodes, 2000);
});
