// The API reference: /openapi.json, the server's own OpenAPI document, rendered by tag.
// Nothing is fetched from anywhere else.
"use strict";

// ref follows a local "$ref" of the document.
function ref(doc, schema) {
  let s = schema;
  for (let i = 0; s && s.$ref && i < 10; i++) {
    s = s.$ref.replace(/^#\//, "").split("/").reduce((o, k) => (o ? o[k] : undefined), doc);
  }
  return s || {};
}

// typeOf names a schema in a few words: "string", "integer (fen)", "array of Order", …
function typeOf(doc, schema) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.allOf) return schema.allOf.map((s) => typeOf(doc, s)).join(" + ");
  if (schema.type === "array") return "array of " + typeOf(doc, schema.items);
  let t = schema.type || "object";
  if (schema.format) t += " (" + schema.format + ")";
  if (schema.enum) t += ": " + schema.enum.join(" | ");
  return t;
}

// fields lists an object schema's properties, one line each.
function fields(doc, schema) {
  const s = ref(doc, schema);
  const props = s.properties || {};
  const required = new Set(s.required || []);
  const names = Object.keys(props);
  if (names.length === 0) return el("span", { class: "muted" }, typeOf(doc, schema));
  return el("table", { class: "fields" }, el("tbody", {}, names.map((n) => el("tr", {},
    el("td", {}, el("code", {}, n), required.has(n) ? el("span", { class: "muted" }, " required") : ""),
    el("td", {}, typeOf(doc, props[n])), el("td", { class: "muted" }, props[n].description || "")))));
}

function operation(doc, method, path, op) {
  const params = op.parameters || [];
  const body = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
  return el("div", { class: "card op", id: op.operationId || "", dataset: { method: method.toUpperCase(), path } },
    el("h3", {}, el("span", { class: "method " + method }, method.toUpperCase()), " ", el("code", {}, path)),
    el("p", {}, op.summary || ""),
    op.description ? el("p", { class: "muted" }, op.description) : "",
    params.length ? [el("h4", {}, "Parameters"), el("table", { class: "fields" }, el("tbody", {}, params.map((p) => el("tr", {},
      el("td", {}, el("code", {}, p.name), " ", el("span", { class: "muted" }, p.in + (p.required ? ", required" : ""))),
      el("td", {}, typeOf(doc, p.schema)), el("td", { class: "muted" }, p.description || "")))))] : "",
    body ? [el("h4", {}, "Body"), fields(doc, body.schema)] : "",
    el("h4", {}, "Responses"),
    el("table", { class: "fields" }, el("tbody", {}, Object.entries(op.responses || {}).map(([code, r]) => {
      const c = r.content && (r.content["application/json"] || r.content["text/event-stream"] || r.content["image/png"]);
      return el("tr", {}, el("td", {}, el("strong", {}, code)), el("td", {}, r.description || ""), el("td", { class: "muted" }, c && c.schema ? typeOf(doc, c.schema) : ""));
    }))));
}

async function load() {
  let doc;
  try {
    const resp = await fetch("/openapi.json");
    doc = await resp.json();
  } catch (e) {
    $("#error").textContent = "could not read /openapi.json: " + e.message;
    return;
  }
  $("#api-title").textContent = (doc.info && doc.info.title ? doc.info.title : "API") + " API reference";
  $("#api-description").textContent = (doc.info && doc.info.description) || "";
  const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (typeof op !== "object" || !op.responses) continue;
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, { tag: { name: tag }, ops: [] });
      byTag.get(tag).ops.push([method, path, op]);
    }
  }
  $("#api-tags").replaceChildren(...[...byTag.values()].map((g) => el("a", { class: "button secondary", href: "#tag-" + g.tag.name }, g.tag.name + " (" + g.ops.length + ")")));
  $("#api-paths").replaceChildren(...[...byTag.values()].map((g) => el("section", { id: "tag-" + g.tag.name },
    el("h2", {}, g.tag.name), g.tag.description ? el("p", { class: "muted" }, g.tag.description) : "",
    g.ops.map(([method, path, op]) => operation(doc, method, path, op)))));
}

document.addEventListener("DOMContentLoaded", load);
