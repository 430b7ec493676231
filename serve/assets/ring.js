"use strict";
// The ring explorer's page: draws what GET /api/ring answers and sends operations
// to the JSON API. No framework, no build step: one file served from the binary.

const STRATEGIES = ["ring", "vnodes", "bounded", "jump", "rendezvous", "maglev", "multiprobe"];
// Okabe–Ito first; more nodes cycle through evenly spaced hues.
const PALETTE = ["#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"];
const SVGNS = "http://www.w3.org/2000/svg";
const TWO32 = 4294967296;

let view = { at: null, latest: null, data: null };

const $ = (selector) => document.querySelector(selector);

function colour(i, n) {
  if (n <= PALETTE.length) return PALETTE[i % PALETTE.length];
  return "hsl(" + Math.round((i * 360) / n) + ", 65%, 45%)";
}

function lighter(hex) {
  return hex.startsWith("#") ? hex + "55" : hex.replace("hsl", "hsla").replace(")", ", 0.35)");
}

function pct(v) {
  return Number.isFinite(v) ? (v * 100).toFixed(1) + "%" : "–";
}

function num(v) {
  return Number.isFinite(v) ? v.toFixed(3) : "–";
}

function hex32(p) {
  return "0x" + p.toString(16).padStart(8, "0");
}

function el(tag, attributes, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attributes, title) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attributes || {})) node.setAttribute(k, v);
  if (title) {
    const t = document.createElementNS(SVGNS, "title");
    t.textContent = title;
    node.appendChild(t);
  }
  return node;
}

function say(text, isError) {
  const box = $("#message");
  box.textContent = text;
  box.className = isError ? "error" : "";
}

async function call(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const answer = await response.json().catch(() => ({ error: "the server answered " + response.status }));
  if (!response.ok) throw new Error(answer.error || "the server answered " + response.status);
  return answer;
}

async function load(at) {
  const data = await call("GET", "/api/ring" + (at ? "?at=" + at : ""));
  view = { at: data.at || null, latest: data.latest || null, data };
  render(data);
  return data;
}

async function operate(method, path, body) {
  try {
    const applied = await call(method, path, body);
    let text = "operation " + applied.seq + ": " + applied.description;
    if (applied.added) text += " — " + applied.added + " keys added";
    if (applied.moved) {
      text += " — " + applied.moved + " keys moved (" + applied.flows.map((f) => f[0] + " → " + f[1] + " " + f[2]).join(", ") + ")";
    } else if (!applied.added && !applied.removed) {
      text += " — no key moved";
    }
    if (applied.note) text += ". " + applied.note;
    await load(null);
    say(text, false);
  } catch (error) {
    say(error.message, true);
  }
}

function fillStrategies(select, current) {
  select.replaceChildren(...STRATEGIES.map((s) => el("option", s === current ? { selected: "" } : {}, s)));
}

function render(data) {
  $("#where").textContent = "Ring file: " + data.db + " — the same file `stampede ring --db` works on.";
  if (!data.initialised) {
    $("#init").hidden = false;
    $("#explorer").hidden = true;
    fillStrategies($("#init-form [name=strategy]"), "vnodes");
    document.body.dataset.ringSeq = "0";
    return;
  }
  $("#init").hidden = true;
  $("#explorer").hidden = false;
  const status = data.status;
  const nodes = status.nodes;
  const n = nodes.length;
  const form = $("#strategy-form");
  fillStrategies(form.querySelector("[name=strategy]"), status.settings.strategy);
  form.querySelector("[name=vnodes]").value = status.settings.vnodes;
  form.querySelector("[name=capacity_factor]").value = status.settings.capacity_factor;
  form.querySelector("[name=probes]").value = status.settings.probes;

  const live = data.at === data.latest;
  $("#at").textContent = "operation " + data.at + " of " + data.latest + ": " + data.entry.description + (live ? "" : " (viewing the past — operations apply to the latest state)");
  $("#back").disabled = data.at <= 1;
  $("#forward").disabled = live;
  $("#latest").disabled = live;

  const moved = new Map(data.moves.map((m) => [m.key, m]));
  drawRing(data, moved);
  drawBars(status);

  const stats = $("#stats");
  stats.replaceChildren();
  const facts = [
    ["strategy", "strategy", status.description],
    ["nodes", "nodes", String(n)],
    ["keys", "keys", String(status.keys)],
    ["mean", "mean keys per node", num(status.mean_keys)],
    ["peak", "peak / mean", num(status.peak_over_mean)],
    ["cv-keys", "coefficient of variation (keys)", num(status.cv_keys)],
    ["cv-ring", "coefficient of variation (ring)", num(status.cv_ring) + (status.cv_theory != null ? " (theory ≈ " + num(status.cv_theory) + ")" : "")],
  ];
  for (const [id, name, value] of facts) {
    stats.append(el("dt", {}, name), el("dd", { id: "stat-" + id }, value));
  }

  const tbody = $("#nodes tbody");
  tbody.replaceChildren();
  nodes.forEach((node, i) => {
    const row = el("tr", { "data-node": node.name });
    const name = el("td");
    name.append(el("span", { class: "swatch", style: "background:" + colour(i, n) }), node.name);
    const remove = el("button", { type: "button", "data-remove-node": node.name }, "remove");
    remove.disabled = !live;
    remove.addEventListener("click", () => operate("DELETE", "/api/ring/nodes/" + encodeURIComponent(node.name)));
    const action = el("td");
    action.append(remove);
    row.append(
      name,
      el("td", { class: "num" }, String(node.weight)),
      el("td", { class: "num" }, String(node.positions.length)),
      el("td", { class: "num" }, node.positions.length ? hex32(node.positions[0]) : "–"),
      el("td", { class: "num keys" }, String(node.keys)),
      el("td", { class: "num" }, pct(node.key_share)),
      el("td", { class: "num" }, pct(node.ring_share)),
      action,
    );
    tbody.append(row);
  });

  const movedBody = $("#moved tbody");
  movedBody.replaceChildren();
  $("#moved-title").textContent = data.entry.moved
    ? "Moved by operation " + data.at + ": " + data.entry.moved + " keys" + (data.moves.length < data.entry.moved ? " (the journal keeps each move of operations up to 10,000)" : "")
    : "Operation " + data.at + " moved no key";
  for (const m of data.moves.slice(0, 500)) {
    movedBody.append(rowOf([m.key, m.from, m.to]));
  }

  const keysBody = $("#keys tbody");
  keysBody.replaceChildren();
  const shown = data.keys.slice(0, 300);
  $("#keys-note").textContent = status.keys > shown.length ? "(first " + shown.length + " of " + status.keys + ")" : "";
  for (const key of shown) {
    const row = rowOf([key.name, hex32(key.position), key.owner == null ? "(none)" : nodes[key.owner].name]);
    row.children[1].className = "num";
    if (moved.has(key.name)) row.className = "moved";
    const remove = el("button", { type: "button" }, "remove");
    remove.disabled = !live;
    remove.addEventListener("click", () => operate("DELETE", "/api/ring/keys/" + encodeURIComponent(key.name)));
    const cell = el("td");
    cell.append(remove);
    row.append(cell);
    keysBody.append(row);
  }
  document.body.dataset.ringSeq = String(data.at);
  loadHistory();
}

function rowOf(values) {
  const row = el("tr");
  for (const v of values) row.append(el("td", {}, v));
  return row;
}

function polar(position, radius) {
  const angle = (position / TWO32) * 2 * Math.PI - Math.PI / 2;
  return [radius * Math.cos(angle), radius * Math.sin(angle)];
}

function drawRing(data, moved) {
  const ring = $("#ring");
  ring.replaceChildren();
  const nodes = data.status.nodes;
  const n = nodes.length;
  ring.append(svg("circle", { cx: 0, cy: 0, r: 230, fill: "none", stroke: "#ccc" }));
  ring.append(svg("circle", { cx: 0, cy: 0, r: 200, fill: "none", stroke: "#eee" }));
  for (const key of data.keys) {
    const [x, y] = polar(key.position, 200);
    const m = moved.get(key.name);
    const owner = key.owner == null ? "(none)" : nodes[key.owner].name;
    const title = key.name + " at " + hex32(key.position) + " → " + owner + (m ? " (moved from " + m.from + ")" : "");
    ring.append(svg("circle", {
      class: "key" + (m ? " moved" : ""), cx: x.toFixed(1), cy: y.toFixed(1), r: m ? 4 : 2.5,
      fill: key.owner == null ? "#999" : colour(key.owner, n),
    }, title));
  }
  const first = new Set();
  for (const [position, node] of data.points) {
    const [x, y] = polar(position, 230);
    const primary = !first.has(node);
    first.add(node);
    ring.append(svg("circle", {
      class: "point", cx: x.toFixed(1), cy: y.toFixed(1), r: primary ? 7 : 4,
      fill: primary ? colour(node, n) : lighter(colour(node, n)),
    }, nodes[node].name + (primary ? "" : " (virtual node)") + " at " + hex32(position)));
  }
  const label = svg("text", { x: 0, y: 5, "text-anchor": "middle", "font-size": 14, fill: "#555" });
  label.textContent = data.points.length ? n + " nodes · " + data.points.length + " points" : n + " nodes (no ring points: " + data.status.settings.strategy + ")";
  ring.append(label);
}

function drawBars(status) {
  const bars = $("#bars");
  bars.replaceChildren();
  const nodes = status.nodes;
  if (!nodes.length) return;
  const totalWeight = nodes.reduce((s, n) => s + n.weight, 0);
  const ideal = nodes.map((n) => (status.keys * n.weight) / totalWeight);
  const top = Math.max(1, ...nodes.map((n) => n.keys), ...ideal) * 1.1;
  const [left, bottom, width, height] = [50, 270, 460, 250];
  const step = width / nodes.length;
  bars.append(svg("line", { x1: left, y1: bottom, x2: left + width, y2: bottom, stroke: "#888" }));
  for (const v of [0, 0.5, 1]) {
    const y = bottom - (v * height) / 1.1;
    const t = svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", "font-size": 11, fill: "#555" });
    t.textContent = String(Math.round((v * top) / 1.1));
    bars.append(t);
  }
  nodes.forEach((node, i) => {
    const h = (node.keys / top) * height;
    const x = left + i * step + step * 0.15;
    bars.append(svg("rect", { x: x.toFixed(1), y: (bottom - h).toFixed(1), width: (step * 0.7).toFixed(1), height: h.toFixed(1), fill: colour(i, nodes.length) },
      node.name + ": " + node.keys + " keys (ideal " + ideal[i].toFixed(1) + ")"));
    const y = bottom - (ideal[i] / top) * height;
    bars.append(svg("line", { x1: x.toFixed(1), x2: (x + step * 0.7).toFixed(1), y1: y.toFixed(1), y2: y.toFixed(1), stroke: "#000", "stroke-dasharray": "4 3" }));
    if (nodes.length <= 20) {
      const t = svg("text", { x: (x + step * 0.35).toFixed(1), y: bottom + 14, "text-anchor": "middle", "font-size": 11, fill: "#333" });
      t.textContent = node.name.length > 10 ? node.name.slice(0, 9) + "…" : node.name;
      bars.append(t);
    }
  });
}

async function loadHistory() {
  const history = await call("GET", "/api/ring/history");
  const list = $("#history");
  list.replaceChildren();
  for (const entry of history) {
    const item = el("li", { value: entry.seq });
    const link = el("a", { href: "#", "data-seq": entry.seq }, entry.description);
    link.addEventListener("click", (e) => {
      e.preventDefault();
      load(entry.seq);
    });
    item.append(link);
    if (entry.moved) item.append(" — " + entry.moved + " keys moved: " + entry.flows.map((f) => f[0] + " → " + f[1] + " " + f[2]).join(", "));
    if (entry.seq === view.at) item.style.fontWeight = "600";
    list.append(item);
  }
}

function formValues(form) {
  return Object.fromEntries(new FormData(form).entries());
}

$("#init-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const v = formValues(e.target);
  try {
    await call("POST", "/api/ring/init", { strategy: v.strategy, hash: v.hash, vnodes: Number(v.vnodes) });
    await load(null);
    say("ring created", false);
  } catch (error) {
    say(error.message, true);
  }
});

$("#add-node").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = formValues(e.target);
  operate("POST", "/api/ring/nodes", { name: v.name.trim(), weight: Number(v.weight || 1) });
  e.target.querySelector("[name=name]").value = "";
});

$("#add-keys").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = formValues(e.target);
  const names = v.names.split(/\s+/).filter(Boolean);
  operate("POST", "/api/ring/keys", names.length ? { names } : { count: Number(v.count) });
  e.target.reset();
});

$("#strategy-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = formValues(e.target);
  const settings = view.data.status.settings;
  operate("POST", "/api/ring/strategy", {
    ...settings, strategy: v.strategy, vnodes: Number(v.vnodes), capacity_factor: Number(v.capacity_factor), probes: Number(v.probes),
  });
});

$("#back").addEventListener("click", () => load(Math.max(1, view.at - 1)));
$("#forward").addEventListener("click", () => load(Math.min(view.latest, view.at + 1)));
$("#latest").addEventListener("click", () => load(null));

// The seed's three experiments, one click each.
$("#exp-similar").addEventListener("click", async () => {
  const taken = new Set(view.data.status.nodes.map((n) => n.name));
  let base = 1;
  while (taken.has("server" + base) || taken.has("server" + (base + 1)) || taken.has("server" + (base + 2))) base += 3;
  for (const i of [base, base + 1, base + 2]) {
    await operate("POST", "/api/ring/nodes", { name: "server" + i, weight: 1 });
  }
  say("added server" + base + " … server" + (base + 2) + ": similar names hash far apart — SHA-256 scatters them; see their first positions", false);
});

$("#exp-join").addEventListener("click", async () => {
  if (view.data.status.keys < 1000) await operate("POST", "/api/ring/keys", { count: 1000 - view.data.status.keys });
  const taken = new Set(view.data.status.nodes.map((n) => n.name));
  let i = 1;
  while (taken.has("newcomer-" + i)) i += 1;
  await operate("POST", "/api/ring/nodes", { name: "newcomer-" + i, weight: 1 });
});

$("#exp-leave").addEventListener("click", () => {
  const nodes = view.data.status.nodes;
  if (!nodes.length) return say("the ring has no node to remove", true);
  const busiest = nodes.reduce((a, b) => (b.keys > a.keys ? b : a));
  operate("DELETE", "/api/ring/nodes/" + encodeURIComponent(busiest.name));
});

load(null).catch((error) => say(error.message, true));
