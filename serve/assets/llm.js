// Shared by the Learn and Sandbox pages: JSON requests that a newer one cancels,
// number formatting with intervals, and the SVG pictures (request timeline,
// attempts histogram, time series). Plain DOM, no library.
"use strict";

const LLM = (() => {
  const NS = "http://www.w3.org/2000/svg";
  // Okabe–Ito: ok, 500, 429, 529, timeout, refused/shed.
  const OUTCOME = { "200": "#009e73", "500": "#d55e00", "429": "#e69f00", "529": "#cc79a7", timeout: "#56b4e9", refused: "#999999" };
  const colour = (outcome) => OUTCOME[outcome] || (String(outcome).startsWith("timeout") ? OUTCOME.timeout : OUTCOME.refused);
  const channel = Math.random().toString(36).slice(2);

  function el(tag, attrs = {}, ...children) {
    const node = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c != null) node.append(c);
    return node;
  }

  // A POST (or GET) whose previous call with the same key is aborted; resolves to the
  // JSON, or rejects with the server's error message.
  const inflight = {};
  async function call(key, path, body) {
    if (inflight[key]) inflight[key].abort();
    const controller = new AbortController();
    inflight[key] = controller;
    const options = body === undefined ? { signal: controller.signal }
      : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, channel }), signal: controller.signal };
    const response = await fetch(path, options);
    const json = await response.json();
    if (inflight[key] === controller) delete inflight[key];
    if (!response.ok) {
      const retryAfter = Number(response.headers.get("Retry-After")) || null;
      throw Object.assign(new Error(json.error || response.statusText), { status: response.status, retryAfter });
    }
    return json;
  }

  function number(x, unit) {
    if (x === null || x === undefined || Number.isNaN(x)) return "–";
    if (unit === "share") return (100 * x).toFixed(1) + "%";
    const a = Math.abs(x);
    const s = a >= 1000 ? x.toFixed(0) : a >= 100 ? x.toFixed(1) : a >= 10 ? x.toFixed(2) : a >= 1 ? x.toFixed(3) : x.toPrecision(3);
    return unit && unit !== "" ? `${s} ${unit}` : s;
  }

  // [mean, lo, hi, se] → "m (lo – hi)".
  function interval(v, unit) {
    if (!v) return "–";
    const [m, lo, hi] = v;
    if (lo === null || hi === null || lo === hi) return number(m, unit);
    return `${number(m, unit)} (${number(lo, unit)} – ${number(hi, unit)})`;
  }

  // Welch's test on two [mean, lo, hi, se]: significant at 5%.
  function significant(a, b) {
    if (!a || !b || a[3] === null || b[3] === null) return false;
    const se = Math.hypot(a[3], b[3]);
    if (se === 0) return a[0] !== b[0];
    return Math.abs(a[0] - b[0]) / se > 1.96;
  }

  function cards(container, list) {
    container.replaceChildren(...list.map((c) => el("div", { class: "card", "data-name": c.name, "data-value": c.value ? c.value[0] : "" },
      el("div", { class: "label", text: c.label }),
      el("div", { class: "value", text: number(c.value && c.value[0], c.unit) }),
      el("div", { class: "ci", text: c.value && c.value[1] !== null ? `95%: ${number(c.value[1], c.unit)} – ${number(c.value[2], c.unit)}` : "" }))));
  }

  // Round tick values covering [lo, hi]: steps of 1, 2 or 5 × 10^k, at most about `count` of them.
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / Math.max(1, count);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    const ticks = [];
    for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return ticks;
  }
  // The top of an axis over [0, v]: the first round tick at or above v.
  function niceTop(v, count) {
    const ticks = niceTicks(0, v, count);
    const step = ticks.length > 1 ? ticks[1] - ticks[0] : v;
    return Math.max(v, Math.ceil(v / step - 1e-9) * step);
  }
  // A tick's label without floating-point noise (0.30000000000000004 → 0.3).
  const tickText = (t) => Number(t.toPrecision(6)).toString();
  // A chart's drawing width: the width it is shown at, so that one unit is one CSS
  // pixel and a 12 px label is 12 px on screen (the page's own figure width, else 900).
  function chartWidth(container) {
    const width = Math.round(container.clientWidth || 0);
    return width >= 320 ? width : 900;
  }
  const TICK_PX = 12, LABEL_PX = 12;

  // The x axis at height y: round ticks over [x0, x1] (about one per 90 px) and its label.
  function axis(svg, x0, x1, y, scale, label) {
    const span = Math.abs(scale(x1) - scale(x0));
    for (const t of niceTicks(x0, x1, Math.max(2, Math.floor(span / 90)))) {
      svg.append(el("svg:line", { x1: scale(t), x2: scale(t), y1: y, y2: y + 4, stroke: "#888" }));
      svg.append(el("svg:text", { class: "tick", x: scale(t), y: y + 17, "font-size": TICK_PX, "text-anchor": "middle", text: tickText(t) }));
    }
    svg.append(el("svg:text", { x: scale((x0 + x1) / 2), y: y + 33, "font-size": LABEL_PX, "text-anchor": "middle", text: label }));
  }

  // The y axis at x: round ticks over [0, top] with grid lines across to `right`.
  function yAxis(svg, top, x, right, scale, unit) {
    const span = Math.abs(scale(0) - scale(top));
    for (const t of niceTicks(0, top, Math.max(2, Math.floor(span / 40)))) {
      svg.append(el("svg:line", { x1: x, x2: right, y1: scale(t), y2: scale(t), stroke: "#eceff3" }));
      svg.append(el("svg:text", { class: "tick", x: x - 5, y: scale(t) + 4, "font-size": TICK_PX, "text-anchor": "end", text: tickText(t) }));
    }
    svg.append(el("svg:line", { x1: x, x2: x, y1: scale(0), y2: scale(top), stroke: "#888" }));
    if (unit) svg.append(el("svg:text", { x: x - 5, y: scale(top) - 13, "font-size": TICK_PX, "text-anchor": "start", text: unit }));
  }

  // Bands behind a chart: incidents ("provider sick") and breaker-open intervals.
  function bands(rows) {
    return rows.filter((r) => r[0] === "incident" || (r[0] === "state" && r[9] === "open"))
      .map((r) => ({ start: r[6], end: r[8], kind: r[0] === "incident" ? "sick" : "open", label: r[0] === "incident" ? `provider sick (${r[9]})` : `circuit open (${r[3]})` }));
  }
  const BAND = { sick: "rgba(213,94,0,0.12)", open: "rgba(0,114,178,0.14)" };

  // One row per call: attempts as bars coloured by outcome, waits as dotted lines,
  // refusals as grey stubs, the fault and breaker-open intervals as bands.
  function timeline(container, tl, note) {
    const rows = tl.rows;
    const calls = tl.order;
    const width = chartWidth(container), rowH = 15, top = 8, left = 110;
    const height = top + calls.length * rowH + 44;
    const ends = rows.filter((r) => r[0] !== "incident" && r[0] !== "state").map((r) => r[8]);
    const starts = rows.filter((r) => r[0] === "call").map((r) => r[6]);
    const t0 = Math.min(...starts), t1 = Math.max(...ends, t0 + 1e-3);
    const x = (t) => left + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (width - left - 10);
    const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "request timeline" });
    for (const b of bands(rows)) {
      if (b.end < t0 || b.start > t1) continue;
      svg.append(el("svg:rect", { class: `band ${b.kind}`, x: x(b.start), y: top, width: Math.max(1, x(b.end) - x(b.start)), height: calls.length * rowH, fill: BAND[b.kind] },
        el("svg:title", { text: `${b.label}: ${b.start.toFixed(2)}–${b.end.toFixed(2)} s` })));
    }
    const index = new Map(calls.map((c, i) => [c, i]));
    for (const r of rows) {
      if (!index.has(r[1])) continue;
      const y = top + index.get(r[1]) * rowH;
      const tip = `call ${r[1]} (${r[3]})`;
      if (r[0] === "call") {
        svg.append(el("svg:text", { x: left - 4, y: y + 11, "font-size": 11, "text-anchor": "end", fill: r[9] === "served" ? "#333" : "#b00020", text: `${r[3]} ${r[1]}` }));
      } else if (r[0] === "attempt") {
        svg.append(el("svg:rect", { class: "attempt", "data-outcome": r[9], "data-call": r[1], "data-attempt": r[5], x: x(r[6]), y: y + 2, width: Math.max(2, x(r[8]) - x(r[6])), height: rowH - 4, fill: colour(r[9]) },
          el("svg:title", { text: `${tip}, attempt ${r[5]}: ${r[9]}, ${r[6].toFixed(3)}–${r[8].toFixed(3)} s` })));
      } else if (r[0] === "wait") {
        svg.append(el("svg:line", { class: "wait", "data-call": r[1], "data-kind": r[9], x1: x(r[6]), x2: x(r[8]), y1: y + rowH / 2, y2: y + rowH / 2, stroke: "#555", "stroke-dasharray": "2 3" },
          el("svg:title", { text: `${tip}: waits (${r[9]}) ${r[6].toFixed(3)}–${r[8].toFixed(3)} s` })));
      } else if (r[0] === "refusal") {
        svg.append(el("svg:rect", { class: "refusal", x: x(r[6]), y: y + 2, width: 4, height: rowH - 4, fill: OUTCOME.refused },
          el("svg:title", { text: `${tip}: refused by ${r[10]} (${r[9]}) at ${r[6].toFixed(3)} s` })));
      }
    }
    axis(svg, t0, t1, top + calls.length * rowH + 2, x, "seconds since the run began");
    const legend = el("div", { class: "legend" }, ...[["ok (200)", "200"], ["500", "500"], ["429", "429"], ["529", "529"], ["timeout", "timeout"], ["refused / shed", "refused"]]
      .map(([label, k]) => el("span", { style: `--c:${OUTCOME[k]}`, text: label })),
      el("span", { style: "--c:transparent;--b:#555", text: "wait (dotted)" }),
      el("span", { style: `--c:${BAND.sick}`, text: "provider sick" }),
      el("span", { style: `--c:${BAND.open}`, text: "circuit open" }));
    container.replaceChildren(el("figure", { class: "chart" },
      el("figcaption", { text: `${note} — showing ${tl.calls_shown} of ${tl.calls_total} requests (replica 0)` }), legend, svg));
  }

  // Attempts per quarter second, ok stacked under failed, with the peak marked.
  function histogram(container, tl) {
    const width = chartWidth(container), height = 230, left = 56, bottom = 40, head = 32;
    const n = tl.ok.length;
    const peak = Math.max(1, tl.peak);
    const top = niceTop(peak, 4);
    const bw = (width - left - 10) / n;
    const y = (v) => height - bottom - (v / top) * (height - bottom - head);
    const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "attempts histogram" });
    yAxis(svg, top, left - 2, width - 10, y, "attempts");
    for (let i = 0; i < n; i++) {
      const ok = tl.ok[i], failed = tl.failed[i];
      const tip = el("svg:title", { text: `${(i * tl.bin_s).toFixed(2)} s: ${ok} ok, ${failed} failed` });
      if (ok) svg.append(el("svg:rect", { x: left + i * bw, y: y(ok), width: Math.max(1, bw - 0.5), height: y(0) - y(ok), fill: OUTCOME["200"] }, tip));
      if (failed) svg.append(el("svg:rect", { x: left + i * bw, y: y(ok + failed), width: Math.max(1, bw - 0.5), height: y(ok) - y(ok + failed), fill: OUTCOME["500"] }, tip.cloneNode(true)));
    }
    svg.append(el("svg:line", { x1: left, x2: width - 10, y1: y(peak), y2: y(peak), stroke: "#333", "stroke-dasharray": "4 3" }));
    svg.append(el("svg:text", { x: width - 12, y: y(peak) - 4, "font-size": TICK_PX, "text-anchor": "end", text: `peak ${tl.peak} at ${tl.peak_at_s.toFixed(2)} s` }));
    axis(svg, 0, n * tl.bin_s, height - bottom + 2, (t) => left + (t / (n * tl.bin_s)) * (width - left - 10), "seconds (bins of ¼ s)");
    container.replaceChildren(el("figure", { class: "chart" },
      el("figcaption", { text: `Attempts per ${tl.bin_s} s (replica 0): ok below, failed above` }),
      el("div", { class: "legend" }, el("span", { style: `--c:${OUTCOME["200"]}`, text: "ok" }), el("span", { style: `--c:${OUTCOME["500"]}`, text: "failed" })), svg));
  }

  // A series chart: each series' mean per bucket with its 95% band, incidents shaded.
  function series(container, title, unit, bucket_s, list, windows) {
    const width = chartWidth(container), height = 240, left = 60, bottom = 40, head = 32;
    const n = Math.max(...list.map((s) => s.values.length));
    const highest = Math.max(1e-9, ...list.flatMap((s) => s.values.map((v) => v[2] ?? v[0] ?? 0)));
    const top = niceTop(highest, 4);
    const x = (i) => left + (i / n) * (width - left - 10);
    const y = (v) => height - bottom - (v / top) * (height - bottom - head);
    const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
    yAxis(svg, top, left - 2, width - 10, y, unit);
    for (const w of windows) svg.append(el("svg:rect", { class: "band sick", x: x(w.start / bucket_s), y: head, width: Math.max(1, x(w.end / bucket_s) - x(w.start / bucket_s)), height: height - bottom - head, fill: BAND.sick }, el("svg:title", { text: w.label })));
    for (const s of list) {
      const band = s.values.map((v, i) => [x(i + 0.5), y(v[2] ?? v[0])]).concat(s.values.map((v, i) => [x(i + 0.5), y(v[1] ?? v[0])]).reverse());
      svg.append(el("svg:polygon", { points: band.map((p) => p.join(",")).join(" "), fill: s.colour, opacity: 0.18 }));
      svg.append(el("svg:polyline", { points: s.values.map((v, i) => `${x(i + 0.5)},${y(v[0])}`).join(" "), fill: "none", stroke: s.colour, "stroke-width": 1.8 }));
      s.values.forEach((v, i) => svg.append(el("svg:circle", { cx: x(i + 0.5), cy: y(v[0]), r: 1.5, fill: s.colour }, el("svg:title", { text: `${s.label} ${(i * bucket_s).toFixed(0)}–${((i + 1) * bucket_s).toFixed(0)} s: ${interval(v, unit)}` }))));
    }
    axis(svg, 0, n * bucket_s, height - bottom + 2, (t) => left + (t / (n * bucket_s)) * (width - left - 10), "seconds");
    const figure = el("figure", { class: "chart" }, el("figcaption", { text: title }),
      el("div", { class: "legend" }, ...list.map((s) => el("span", { style: `--c:${s.colour}`, text: `${s.label} (mean, 95% band)` })), el("span", { style: `--c:${BAND.sick}`, text: "incident" })), svg);
    container.append(figure);
  }

  // A 503 (every simulation slot taken): say so, and run again after the time the server gave.
  function retryLater(error, status, again) {
    if (error.status !== 503) return false;
    const seconds = error.retryAfter || 2;
    status.textContent = `the server is busy (every simulation slot is taken): trying again in ${seconds} s`;
    status.className = "status stale";
    document.body.dataset.state = "busy";
    setTimeout(again, seconds * 1000);
    return true;
  }

  return { retryLater, el, call, number, interval, significant, cards, timeline, histogram, series, channel, niceTicks };
})();
