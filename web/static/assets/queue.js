// The pay page of a queue ticket (/pay/{ticket_id}; a ticket id starts with "T", an order
// number is all digits). A queued SKU's order request answers with a ticket: this page shows
// its place in the queue, follows it by the ticket's event stream (or, where that fails, by
// reading it every 2 s) and moves on by itself: to the pay page of the order its turn made,
// or to what ended it (sold out, expired, refused), with the way back to the shop.
"use strict";

const QUEUE_STRINGS = {
  en: {
    "title.queue": "orderpay — in the queue", "queue.heading": "Queue ticket",
    "queue.position": (n) => ["In the queue, position ", el("strong", { id: "queue-position" }, String(n))],
    "queue.waiting": "In the queue",
    "queue.item": "Item", "queue.until": "Place kept until",
    "queue.note": "Keep this page open: when your turn comes it takes you to pay, by itself. Nothing is charged while you wait.",
    "queue.ORDERED": "Your turn has come: your order is made. Opening its payment…",
    "queue.SOLD_OUT": "Sold out: every unit is taken. Nothing was charged.",
    "queue.EXPIRED": "Your turn did not come within the sale's time. Nothing was charged.",
    "queue.REFUSED": "Your turn came, but the order could not be made. Nothing was charged.",
    "queue.reason": (r) => "Why: " + r,
    "queue.back": "Back to the shop",
  },
  zh: {
    "title.queue": "orderpay — 排队中", "queue.heading": "排队凭证",
    "queue.position": (n) => ["排队中，第 ", el("strong", { id: "queue-position" }, String(n)), " 位"],
    "queue.waiting": "排队中",
    "queue.item": "商品", "queue.until": "排队保留至",
    "queue.note": "请保持本页打开：轮到您时，本页会自动转到付款。排队期间不会扣款。",
    "queue.ORDERED": "轮到您了：订单已生成，正在打开付款页…",
    "queue.SOLD_OUT": "已售罄：所有商品都已售出。未扣任何款项。",
    "queue.EXPIRED": "在活动时限内没有轮到您。未扣任何款项。",
    "queue.REFUSED": "轮到您了，但未能为您下单。未扣任何款项。",
    "queue.reason": (r) => "原因：" + r,
    "queue.back": "返回商城",
  },
};
Object.assign(STRINGS.en, QUEUE_STRINGS.en);
Object.assign(STRINGS.zh, QUEUE_STRINGS.zh);

// isTicketID says whether the pay page's id is a ticket's: it starts with "T".
function isTicketID(id) { return id.startsWith("T"); }

const queue = { url: "", ticket: null, stopStream: null, pollTimer: null, transport: "" };

// followTicket shows the ticket id's page in place of the cashier, and follows it until it
// ends.
async function followTicket(id) {
  queue.url = "/v1/tickets/" + encodeURIComponent(id);
  document.body.classList.add("queued");
  $("#queue").classList.remove("hidden");
  $("#ticket-id").textContent = id;
  document.title = t("title.queue");
  onLang(() => { document.title = t("title.queue"); if (queue.ticket) drawTicket(); });
  let tk;
  try {
    tk = await buyerRead(queue.url);
  } catch (e) {
    $("#queue-error").textContent = e.message;
    $("#queue-note").classList.add("hidden");
    $("#queue-back").classList.remove("hidden");
    return;
  }
  showTicket(tk);
  if (tk.state !== "WAITING") return;
  queue.stopStream = openEvents(queue.url + "/events", (name, data) => {
    queue.transport = "sse";
    showTicket(JSON.parse(data));
  }, () => {
    // The stream could not go on (refused past a cap, a proxy that buffers): read instead.
    queue.stopStream = null;
    if (queue.ticket.state === "WAITING" && !queue.pollTimer) pollTicket();
  }, "ticket");
}

// pollTicket reads the ticket every 2 s.
function pollTicket() {
  queue.transport = "poll";
  drawTicket();
  queue.pollTimer = setInterval(async () => {
    try {
      showTicket(await buyerRead(queue.url));
      $("#queue-error").textContent = "";
    } catch (e) {
      $("#queue-error").textContent = e.message;
    }
  }, 2000);
}

// showTicket takes the ticket as the server sent it. Once it ends nothing follows it any
// more; its order is paid on the order's own pay page, which replaces this one in the
// history (back goes to the shop, not to a queue that is over).
function showTicket(tk) {
  queue.ticket = tk;
  if (tk.state !== "WAITING") {
    if (queue.stopStream) { queue.stopStream(); queue.stopStream = null; }
    if (queue.pollTimer) { clearInterval(queue.pollTimer); queue.pollTimer = null; }
    queue.transport = "";
  }
  drawTicket();
  if (tk.state === "ORDERED" && tk.order_no) location.replace("/pay/" + encodeURIComponent(tk.order_no));
}

// drawTicket writes what depends on the ticket and the language. #queue-state, a polite
// live region, says the position while the ticket waits and what ended it once it ends;
// data-state and data-position keep the machine-readable ones.
function drawTicket() {
  const tk = queue.ticket, waiting = tk.state === "WAITING";
  const s = $("#queue-state");
  s.dataset.state = tk.state;
  s.dataset.position = String(tk.position || 0);
  s.className = "queue-state " + tk.state;
  if (waiting) s.replaceChildren(...[].concat(tk.position > 0 ? t("queue.position", tk.position) : t("queue.waiting")));
  else s.textContent = ("queue." + tk.state) in STRINGS.en ? t("queue." + tk.state) : tk.state;
  $("#queue-reason").textContent = tk.reason ? t("queue.reason", tk.reason) : "";
  $("#queue-reason").classList.toggle("hidden", !tk.reason);
  $("#queue-sku").textContent = tk.sku;
  $("#queue-qty").textContent = String(tk.qty);
  $("#queue-until").textContent = when(tk.expires_at);
  for (const sel of ["#queue-until", "#queue-until-label", "#queue-note"]) $(sel).classList.toggle("hidden", !waiting);
  $("#queue-back").classList.toggle("hidden", waiting || tk.state === "ORDERED");
  const tr = $("#queue-transport");
  tr.dataset.transport = queue.transport;
  tr.textContent = queue.transport === "sse" ? t("live") : queue.transport === "poll" ? t("polling") : "";
}
