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
    if (!response.ok) throw Object.assign(new Error(json.error || response.statusText), { status: response.status });
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

  function axis(svg, x0, x1, y, scale, ticks, label) {
    for (let i = 0; i <= ticks; i++) {
      const t = x0 + (i / ticks) * (x1 - x0);
      svg.append(el("svg:line", { x1: scale(t), x2: scale(t), y1: y, y2: y + 4, stroke: "#888" }));
      svg.append(el("svg:text", { x: scale(t), y: y + 15, "font-size": 10, "text-anchor": "middle", text: t.toFixed(t < 10 ? 1 : 0) }));
    }
    svg.append(el("svg:text", { x: scale((x0 + x1) / 2), y: y + 28, "font-size": 11, "text-anchor": "middle", text: label }));
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
    const width = 900, rowH = 12, top = 8, left = 90;
    const height = top + calls.length * rowH + 40;
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
        svg.append(el("svg:text", { x: left - 4, y: y + 9, "font-size": 9, "text-anchor": "end", fill: r[9] === "served" ? "#333" : "#b00020", text: `${r[3]} ${r[1]}` }));
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
    axis(svg, t0, t1, top + calls.length * rowH + 2, x, 8, "seconds since the run began");
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
    const width = 900, height = 180, left = 40, bottom = 34;
    const n = tl.ok.length;
    const peak = Math.max(1, tl.peak);
    const bw = (width - left - 10) / n;
    const y = (v) => height - bottom - (v / peak) * (height - bottom - 10);
    const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "attempts histogram" });
    for (let i = 0; i < n; i++) {
      const ok = tl.ok[i], failed = tl.failed[i];
      const tip = el("svg:title", { text: `${(i * tl.bin_s).toFixed(2)} s: ${ok} ok, ${failed} failed` });
      if (ok) svg.append(el("svg:rect", { x: left + i * bw, y: y(ok), width: Math.max(1, bw - 0.5), height: y(0) - y(ok), fill: OUTCOME["200"] }, tip));
      if (failed) svg.append(el("svg:rect", { x: left + i * bw, y: y(ok + failed), width: Math.max(1, bw - 0.5), height: y(ok) - y(ok + failed), fill: OUTCOME["500"] }, tip.cloneNode(true)));
    }
    svg.append(el("svg:line", { x1: left, x2: width - 10, y1: y(peak), y2: y(peak), stroke: "#333", "stroke-dasharray": "4 3" }));
    svg.append(el("svg:text", { x: width - 12, y: y(peak) - 3, "font-size": 10, "text-anchor": "end", text: `peak ${tl.peak} at ${tl.peak_at_s.toFixed(2)} s` }));
    axis(svg, 0, n * tl.bin_s, height - bottom + 2, (t) => left + (t / (n * tl.bin_s)) * (width - left - 10), 8, "seconds (bins of ¼ s)");
    container.replaceChildren(el("figure", { class: "chart" },
      el("figcaption", { text: `Attempts per ${tl.bin_s} s (replica 0): ok below, failed above` }),
      el("div", { class: "legend" }, el("span", { style: `--c:${OUTCOME["200"]}`, text: "ok" }), el("span", { style: `--c:${OUTCOME["500"]}`, text: "failed" })), svg));
  }

  // A series chart: each series' mean per bucket with its 95% band, incidents shaded.
  function series(container, title, unit, bucket_s, list, windows) {
    const width = 900, height = 200, left = 50, bottom = 34;
    const n = Math.max(...list.map((s) => s.values.length));
    const top = Math.max(1e-9, ...list.flatMap((s) => s.values.map((v) => v[2] ?? v[0] ?? 0)));
    const x = (i) => left + (i / n) * (width - left - 10);
    const y = (v) => height - bottom - (v / top) * (height - bottom - 10);
    const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
    for (const w of windows) svg.append(el("svg:rect", { class: "band sick", x: x(w.start / bucket_s), y: 10, width: Math.max(1, x(w.end / bucket_s) - x(w.start / bucket_s)), height: height - bottom - 10, fill: BAND.sick }, el("svg:title", { text: w.label })));
    for (const s of list) {
      const band = s.values.map((v, i) => [x(i + 0.5), y(v[2] ?? v[0])]).concat(s.values.map((v, i) => [x(i + 0.5), y(v[1] ?? v[0])]).reverse());
      svg.append(el("svg:polygon", { points: band.map((p) => p.join(",")).join(" "), fill: s.colour, opacity: 0.18 }));
      svg.append(el("svg:polyline", { points: s.values.map((v, i) => `${x(i + 0.5)},${y(v[0])}`).join(" "), fill: "none", stroke: s.colour, "stroke-width": 1.8 }));
      s.values.forEach((v, i) => svg.append(el("svg:circle", { cx: x(i + 0.5), cy: y(v[0]), r: 1.5, fill: s.colour }, el("svg:title", { text: `${s.label} ${(i * bucket_s).toFixed(0)}–${((i + 1) * bucket_s).toFixed(0)} s: ${interval(v, unit)}` }))));
    }
    svg.append(el("svg:text", { x: 4, y: 14, "font-size": 10, text: `${number(top)} ${unit}` }));
    axis(svg, 0, n * bucket_s, height - bottom + 2, (t) => left + (t / (n * bucket_s)) * (width - left - 10), 7, "seconds");
    container.append(el("figure", { class: "chart" }, el("figcaption", { text: title }),
      el("div", { class: "legend" }, ...list.map((s) => el("span", { style: `--c:${s.colour}`, text: `${s.label} (mean, 95% band)` })), el("span", { style: `--c:${BAND.sick}`, text: "incident" })), svg));
  }

  return { el, call, number, interval, significant, cards, timeline, histogram, series, channel };
})();
