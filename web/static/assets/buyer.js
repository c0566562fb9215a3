// What the buyer's pages share beyond common.js: one language per page (English or Chinese,
// switched in the header and remembered in localStorage), the words the buyer reads for
// every status (the machine-readable status stays in data-status), the countdown's format,
// dates, and the header.
"use strict";

const LANG_KEY = "orderpay.lang";

const STRINGS = {
  en: {
    "nav.catalogue": "Catalogue", "nav.orders": "My orders", "who": "buyer", "switch": "中文",
    "not-signed-in": "not signed in — open this page from the shop's sign-in",
    "title.catalogue": "orderpay — catalogue", "title.orders": "orderpay — my orders",
    "title.order": "orderpay — order", "title.pay": "orderpay — pay",
    // catalogue and cart
    "catalogue": "Catalogue", "cart": "Cart", "col.item": "Item", "col.type": "Type", "col.price": "Price",
    "col.stock": "In stock", "add": "Add to cart", "nothing-for-sale": "Nothing for sale yet.",
    "cart-empty": "The cart is empty.", "remove": "Remove", "total": "Total", "coupon": "coupon id (optional)",
    "place-order": "Place order", "deliver-to": "Deliver to", "addr.name": "Name", "addr.phone": "Phone",
    "addr.detail": "Address", "addr.optional": "You can also give it on the order's page until it ships.",
    "type.normal": "regular (3 days to pay)", "type.special": "special offer (30 min to pay)",
    "type.fast": "fast-moving goods (15 min to pay)",
    // orders
    "my-orders": "My orders", "col.order": "Order", "col.created": "Created", "col.amount": "Amount",
    "col.status": "Status", "pay": "Pay", "no-orders": "No orders yet.",
    // one order
    "order": "Order", "items": "Items", "col.unit-price": "Unit price", "col.qty": "Qty", "col.discount": "Discount",
    "col.payable": "Payable", "parcels": "Parcels", "after-sales": "Refunds and returns", "none-yet": "none yet",
    "status": "Status", "buyer": "Buyer", "discount": "Discount", "payable": "Payable", "created": "Ordered at",
    "paid": "Paid at", "cancelled": "Cancelled at", "time-left": "Time left to pay", "refunded-amount": "Refunded amount",
    "refunded-at": "Refunded at",
    "cancel-order": "Cancel order", "address": "Delivery address", "no-address": "No delivery address yet: the parcels cannot ship without one.",
    "save-address": "Save address", "address-saved": "Address saved.", "address-fixed": "The first parcel has shipped: the address can no longer change.",
    "parcel": "Parcel", "carrier": "Carrier", "shipped": "Shipped at", "receipt-in": "Receipt confirmed for you in",
    "received": "Received at", "contents": "Contents", "confirm-receipt": "Confirm receipt",
    "extend": "Extend receipt by 3 days", "extended": "You extended the receipt time once.",
    "kind.refund": "Refund", "kind.return": "Return", "amount": "Amount", "reason": "Reason",
    "sent-back": "Sent back by", "requested": "Requested at", "units": "Units", "units-refunded": (n) => n + " refunded",
    "ship-back": "Send the goods back", "ship-back-carrier": "Carrier", "ship-back-tracking": "Tracking number",
    "ship-back-button": "Sent", "ask": "Ask for a refund or a return",
    "ask.refund": "Refund (not shipped yet)", "ask.return": "Return (within 7 days of receipt)",
    "ask.kind": "What", "ask.units": "How many", "ask.up-to": (n) => "up to " + n, "ask.reason": "Reason (optional)",
    "ask.submit": "Send the request", "ask.none": "Choose at least one unit.",
    "ask.nothing": "Nothing in this order can be refunded or returned now.",
    // pay
    "pay-order": "Pay order", "pay-with": "Pay with", "alipay": "Alipay", "wechat": "WeChat Pay",
    "scan-with": (ch) => ["Scan with ", ch, ". The code:"], "qr-alt": "QR code to scan with the wallet",
    "amount-label": "Amount", "order-details": "Order details", "until": (t) => "until " + t + " (server time)",
    "live": "(live)", "polling": "(polling)", "banner.paid": "Paid ✓", "banner.cancelled": "Cancelled",
  },
  zh: {
    "nav.catalogue": "商品", "nav.orders": "我的订单", "who": "买家", "switch": "English",
    "not-signed-in": "未登录——请从商城的登录页打开本页",
    "title.catalogue": "orderpay — 商品", "title.orders": "orderpay — 我的订单",
    "title.order": "orderpay — 订单", "title.pay": "orderpay — 支付",
    "catalogue": "商品", "cart": "购物车", "col.item": "商品", "col.type": "类型", "col.price": "价格",
    "col.stock": "库存", "add": "加入购物车", "nothing-for-sale": "暂无在售商品。",
    "cart-empty": "购物车是空的。", "remove": "移除", "total": "合计", "coupon": "优惠券 ID（可选）",
    "place-order": "提交订单", "deliver-to": "收货地址", "addr.name": "收货人", "addr.phone": "手机号",
    "addr.detail": "详细地址", "addr.optional": "发货前也可以在订单页填写。",
    "type.normal": "普通商品（3 天内付款）", "type.special": "特价（30 分钟内付款）", "type.fast": "快消品（15 分钟内付款）",
    "my-orders": "我的订单", "col.order": "订单", "col.created": "下单时间", "col.amount": "金额",
    "col.status": "状态", "pay": "去支付", "no-orders": "还没有订单。",
    "order": "订单", "items": "商品", "col.unit-price": "单价", "col.qty": "数量", "col.discount": "优惠",
    "col.payable": "实付", "parcels": "包裹", "after-sales": "退款/售后", "none-yet": "暂无",
    "status": "状态", "buyer": "买家", "discount": "优惠", "payable": "实付", "created": "下单时间",
    "paid": "付款时间", "cancelled": "取消时间", "time-left": "剩余支付时间", "refunded-amount": "退款金额",
    "refunded-at": "退款时间",
    "cancel-order": "取消订单", "address": "收货地址", "no-address": "还没有收货地址：没有地址包裹无法发货。",
    "save-address": "保存地址", "address-saved": "地址已保存。", "address-fixed": "第一个包裹已发货，地址不能再修改。",
    "parcel": "包裹", "carrier": "快递", "shipped": "发货时间", "receipt-in": "自动确认收货剩余",
    "received": "收货时间", "contents": "内含", "confirm-receipt": "确认收货",
    "extend": "延长收货 3 天", "extended": "已延长过一次收货时间。",
    "kind.refund": "仅退款", "kind.return": "退货退款", "amount": "金额", "reason": "原因",
    "sent-back": "退货快递", "requested": "申请时间", "units": "商品", "units-refunded": (n) => "已退 " + n,
    "ship-back": "寄回商品", "ship-back-carrier": "快递公司", "ship-back-tracking": "快递单号",
    "ship-back-button": "已寄出", "ask": "申请退款/退货",
    "ask.refund": "仅退款（未发货）", "ask.return": "退货退款（收货 7 天内）",
    "ask.kind": "类型", "ask.units": "数量", "ask.up-to": (n) => "最多 " + n, "ask.reason": "原因（可选）",
    "ask.submit": "提交申请", "ask.none": "请至少选择一件。",
    "ask.nothing": "本订单目前没有可退款或退货的商品。",
    "pay-order": "支付订单", "pay-with": "选择支付方式", "alipay": "支付宝", "wechat": "微信支付",
    "scan-with": (ch) => ["请用", ch, "扫码。支付码："], "qr-alt": "用钱包扫描的二维码",
    "amount-label": "金额", "order-details": "订单详情", "until": (t) => "截止 " + t + "（服务器时间）",
    "live": "（实时）", "polling": "（轮询）", "banner.paid": "已支付 ✓", "banner.cancelled": "已取消",
  },
};

// The words for each status, by what it is the status of.
const STATUS_WORDS = {
  order: {
    PENDING_PAYMENT: ["Awaiting payment", "待付款"], PAID: ["Paid", "已付款"], SHIPPED: ["Shipped", "已发货"],
    RECEIVED: ["Received", "已收货"], COMPLETED: ["Completed", "已完成"], CANCELLED: ["Cancelled", "已取消"],
    REFUNDED: ["Refunded", "已退款"],
  },
  shipment: {
    PENDING: ["Not shipped yet", "待发货"], SHIPPED: ["On its way", "运输中"], RECEIVED: ["Received", "已签收"],
    CANCELLED: ["Cancelled, refunded", "已取消（已退款）"],
  },
  aftersale: {
    REQUESTED: ["Awaiting review", "待审核"], APPROVED: ["Approved", "已同意"], REJECTED: ["Rejected", "已拒绝"],
    AWAITING_GOODS: ["Send the goods back", "待寄回商品"], SENT_BACK: ["Sent back, awaiting the merchant", "已寄回，待商家收货"],
    GOODS_RECEIVED: ["Goods back with the merchant", "商家已收货"], REFUNDING: ["Refunding", "退款中"],
    SUCCESS: ["Refunded", "退款成功"],
  },
  refund: {
    NONE: ["No refund", "无退款"], IN_PROGRESS: ["After-sales in progress", "售后处理中"],
    PARTIAL: ["Partly refunded", "部分退款"], FULL: ["Fully refunded", "全额退款"],
  },
};

function storedLang() {
  const l = localStorage.getItem(LANG_KEY);
  if (l === "en" || l === "zh") return l;
  return (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : "en";
}

let lang = storedLang();

// t is the text of key in the page's language; a function entry is called with args.
function t(key, ...args) {
  const v = STRINGS[lang][key] ?? STRINGS.en[key] ?? key;
  return typeof v === "function" ? v(...args) : v;
}

// statusWord is what the buyer reads for a status of an order, parcel, after-sales request
// or refund; an unknown status shows as it is.
function statusWord(kind, status) {
  const w = (STATUS_WORDS[kind] || {})[status];
  return w ? w[lang === "zh" ? 1 : 0] : status;
}

// badge shows a status in words; data-status keeps the machine-readable one. shown, when
// given, picks the words of another status (a return sent back is still AWAITING_GOODS).
function badge(kind, status, attrs, shown) {
  return el("span", Object.assign({ class: "status " + status, dataset: { status } }, attrs || {}), statusWord(kind, shown || status));
}

// countdown writes seconds left: "12:34", "1:02:03", "2d 03:04" in English; "12分34秒",
// "1小时02分03秒", "2天03:04" in Chinese.
function countdown(s) {
  s = Math.max(0, Math.floor(s));
  const p = (n) => String(n).padStart(2, "0");
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (lang === "zh") {
    if (d > 0) return d + "天" + p(h) + ":" + p(m);
    return (h > 0 ? h + "小时" : "") + p(m) + "分" + p(sec) + "秒";
  }
  if (d > 0) return d + "d " + p(h) + ":" + p(m);
  return (h > 0 ? h + ":" : "") + p(m) + ":" + p(sec);
}

// when shows a time in the page's language, to the second (formatTime, common.js).
function when(s) { return formatTime(s, lang); }

// applyStatic translates the page's own markup: [data-i18n] elements' text, and the
// placeholder and alt of [data-i18n-placeholder] and [data-i18n-alt].
function applyStatic() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  for (const e of document.querySelectorAll("[data-i18n]")) e.textContent = t(e.dataset.i18n);
  for (const e of document.querySelectorAll("[data-i18n-placeholder]")) e.placeholder = t(e.dataset.i18nPlaceholder);
  for (const e of document.querySelectorAll("[data-i18n-alt]")) e.alt = t(e.dataset.i18nAlt);
}

const langListeners = [];

// onLang registers what a page redraws when the language changes.
function onLang(fn) { langListeners.push(fn); }

function setLang(l) {
  lang = l;
  localStorage.setItem(LANG_KEY, l);
  applyStatic();
  for (const fn of langListeners) fn();
}

// showHeader puts the buyer's header in place of #top, and again on a language change.
function showHeader(active) {
  const draw = () => $("#top").replaceWith(buyerHeader(active));
  draw();
  onLang(draw);
}

function buyerHeader(active) {
  const input = session.mode === "none" ? el("input", { id: "buyer-id", value: buyerId(), title: t("who"), onchange: (e) => {
    const v = e.target.value.trim();
    if (v) localStorage.setItem("orderpay.buyer", v);
    location.reload();
  } }) : el("strong", { id: "buyer-id" }, session.buyer || t("not-signed-in"));
  const link = (href, text) => el("a", { href, class: active === href ? "active" : "" }, text);
  return el("header", { id: "top" }, el("span", { class: "brand" }, "orderpay"),
    el("nav", {}, link("/", t("nav.catalogue")), link("/orders", t("nav.orders"))),
    el("span", { class: "who" }, t("who") + " ", input),
    el("button", { id: "lang", class: "secondary small", lang: lang === "zh" ? "en" : "zh", onclick: () => setLang(lang === "zh" ? "en" : "zh") }, t("switch")));
}

// buyerWrite sends one of the buyer's writes: the body names the buyer (the signed-in one
// must be named as themselves, or left out; in the demo's mode none it says who), and so
// does X-Buyer-Id, the key of the buyer's rate limit.
function buyerWrite(path, method, body) {
  return api(path, { method, body: Object.assign({ buyer_id: buyerId() }, body || {}), headers: { "X-Buyer-Id": buyerId() } });
}

// buyerRead reads one of the buyer's own things (an order, its refunds) as the buyer: in the
// demo's mode none, X-Buyer-Id says who, and another buyer's order is not found, as with a
// login.
function buyerRead(path) {
  return api(path, { headers: { "X-Buyer-Id": buyerId() } });
}

// table wraps a table so that it scrolls by itself on a narrow screen instead of the page.
function scroller(table) { return el("div", { class: "scroll" }, table); }

applyStatic();
