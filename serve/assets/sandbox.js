// The Sandbox: edits a configuration (the gate order, the knobs, incidents, load),
// reruns it on the server on every change (the newer run cancels the older), and
// shows the results; a pinned run is compared side by side with a test of which
// differences are significant.
"use strict";

(async () => {
  const $ = (id) => document.getElementById(id);
  const { el } = LLM;
  const defaults = await LLM.call("defaults", "/api/sandbox");
  let config = structuredClone(defaults.config);
  // The product being simulated: the fixture's tiers and classes, and the classes whose
  // failed calls the fallback gate can re-send to another tier (the shipped one until a
  // scenario naming its own fixture is loaded).
  let product = defaults.product;
  let pinned = null, current = null, timer = null;

  // Knobs per gate: [field in config.knobs, label, step, kind].
  const GATE_KNOBS = {
    admission: [["ladder_rungs", "ladder rungs (pressure for L1–L4)", 0.01, "rungs"]],
    bulkhead: [["bulkhead_queue", "queue order", null, "queue"], ["codel_target_s", "CoDel target (s)", 0.01]],
    adaptive: [["limiter", "limiter", null, "limiter"]],
    breaker: [["breaker_failure_ratio", "trip at failure ratio", 0.05], ["breaker_open_s", "open time (s)", 1], ["breaker_counts_429", "count 429s as failures", null, "bool"]],
    quota: [["limiter_headroom", "headroom (share of the quota)", 0.05], ["limiter_longest_wait_s", "longest wait (s)", 0.5]],
    retry: [["retry_budget", "retry budget on", null, "bool"], ["retry_budget_ratio", "budget (retries per success; 0 funds none)", 0.05], ["backoff_base_s", "backoff base (s)", 0.1], ["backoff_cap_s", "backoff cap (s)", 1], ["honour_retry_after", "honour retry-after", null, "bool"]],
  };
  // The fallback gate's knobs come from the product: a tier for each re-sendable class.
  const gateKnobs = (gate) => gate === "fallback"
    ? product.resendable.map((c) => [c, `failed ${c} calls are re-sent to tier`, null, "fallback"])
    : GATE_KNOBS[gate];

  function input(field, step, kind) {
    const k = config.knobs;
    const changed = (value) => { k[field] = value; changedConfig(); };
    if (kind === "bool") return el("input", { type: "checkbox", ...(k[field] ? { checked: "" } : {}), onchange: (e) => changed(e.target.checked) });
    if (kind === "queue") return el("select", { onchange: (e) => changed(e.target.value) }, ...defaults.queue_orders.map((q) => el("option", { value: q, ...(q === k[field] ? { selected: "" } : {}), text: q })));
    if (kind === "limiter") return el("select", { onchange: (e) => changed(e.target.value) }, ...defaults.limiters.map((l) => el("option", { value: l, ...(l === k[field] ? { selected: "" } : {}), text: l })));
    if (kind === "fallback") {
      const chosen = k.fallback_tiers[field];
      const pick = (e) => { if (e.target.value) k.fallback_tiers[field] = e.target.value; else delete k.fallback_tiers[field]; changedConfig(); };
      return el("select", { "data-fallback": field, onchange: pick }, el("option", { value: "", text: "none" }), ...product.tiers.map((t) => el("option", { value: t, ...(t === chosen ? { selected: "" } : {}), text: t })));
    }
    if (kind === "rungs") return el("span", {}, ...k.ladder_rungs.map((r, i) => el("input", { type: "number", step, min: 0, max: 1, value: r, style: "width:4.5rem", onchange: (e) => { k.ladder_rungs[i] = Number(e.target.value); changedConfig(); } })));
    return el("input", { type: "number", step, value: k[field], style: "width:6rem", onchange: (e) => changed(Number(e.target.value)) });
  }

  function move(i, by) {
    const j = i + by;
    if (j < 0 || j >= config.gates.length) return;
    [config.gates[i], config.gates[j]] = [config.gates[j], config.gates[i]];
    changedConfig();
    stack();
    $("stack").children[j].focus();
  }

  function stack() {
    const list = $("stack");
    list.replaceChildren(...config.gates.map((gate, i) => {
      const li = el("li", { tabindex: 0, draggable: "true", "data-gate": gate, "aria-label": `${i + 1}. ${gate}` },
        el("div", { class: "row" },
          el("span", { class: "name", text: `${i + 1}. ${gate}` }),
          el("button", { "aria-label": `move ${gate} up`, onclick: () => move(i, -1), text: "↑" }),
          el("button", { "aria-label": `move ${gate} down`, onclick: () => move(i, 1), text: "↓" }),
          el("button", { "aria-label": `remove ${gate}`, onclick: () => remove(i), text: "remove" })),
        el("div", { class: "why", text: defaults.notes[gate] }),
        ...(gateKnobs(gate).length ? [el("details", {}, el("summary", { text: "knobs" }),
          ...gateKnobs(gate).map(([field, label, step, kind]) => el("label", { style: "display:block;margin:.2rem 0" }, `${label} `, input(field, step, kind))))] : []));
      li.addEventListener("keydown", (e) => {
        if (e.target !== li) return;
        if (e.altKey && e.key === "ArrowUp") { e.preventDefault(); move(i, -1); }
        else if (e.altKey && e.key === "ArrowDown") { e.preventDefault(); move(i, 1); }
        else if (e.key === "Delete") { e.preventDefault(); remove(i); }
      });
      li.addEventListener("dragstart", (e) => { e.dataTransfer.setData("text/plain", String(i)); li.classList.add("dragging"); });
      li.addEventListener("dragend", () => li.classList.remove("dragging"));
      li.addEventListener("dragover", (e) => e.preventDefault());
      li.addEventListener("drop", (e) => {
        e.preventDefault();
        const from = Number(e.dataTransfer.getData("text/plain"));
        const [gate] = config.gates.splice(from, 1);
        config.gates.splice(i, 0, gate);
        changedConfig();
        stack();
      });
      return li;
    }));
    const removed = defaults.gates.filter((g) => !config.gates.includes(g));
    $("palette").replaceChildren(...(removed.length ? [el("span", { text: "removed: " })] : []),
      ...removed.map((g) => el("button", { "data-restore": g, onclick: () => { config.gates.push(g); changedConfig(); stack(); }, text: `restore ${g}` })));
  }

  function remove(i) {
    config.gates.splice(i, 1);
    changedConfig();
    stack();
  }

  function incidents() {
    $("incidents").replaceChildren(...config.incidents.map((incident, i) => {
      const set = (field, value) => { incident[field] = value; changedConfig(); };
      const select = (field, options) => el("select", { onchange: (e) => set(field, e.target.value) }, ...options.map((o) => el("option", { value: o, ...(o === incident[field] ? { selected: "" } : {}), text: o })));
      const number = (field) => el("input", { type: "number", step: 1, value: incident[field], "aria-label": field.replace("_s", " (s)").replace("_", " "), onchange: (e) => set(field, Number(e.target.value)) });
      // Severity: a capacity step's share of the fleet still up; a brownout's share of
      // slots left (health), its error rate and its latency multiplier. An outage has none.
      const severity = (field, fallback, props, label) => {
        const shown = incident.kind === "capacity_step" ? field === "scale" : incident.kind === "brownout" && field !== "scale";
        return el("input", { type: "number", ...props, value: shown ? (incident[field] ?? fallback) : "", "aria-label": label,
          ...(shown ? {} : { disabled: "" }), onchange: (e) => set(field, Number(e.target.value)) });
      };
      const up = incident.kind === "capacity_step"
        ? severity("scale", 0.5, { step: 0.05, min: 0.05, max: 1 }, "share of the fleet still up")
        : severity("health", 0.2, { step: 0.05, min: 0.05, max: 1 }, "share of the slots left");
      const errors = severity("error_rate", 0.25, { step: 0.05, min: 0, max: 1 }, "share of calls that fail");
      const slower = severity("latency_factor", 1, { step: 0.5, min: 0.1 }, "latency multiplier");
      const kind = el("select", { onchange: (e) => {
        incident.kind = e.target.value;
        if (incident.kind === "capacity_step") incident.scale = incident.scale ?? 0.5; else delete incident.scale;
        if (incident.kind !== "brownout") { delete incident.health; delete incident.error_rate; delete incident.latency_factor; }
        incidents();
        changedConfig();
      } }, ...defaults.incident_kinds.map((o) => el("option", { value: o, ...(o === incident.kind ? { selected: "" } : {}), text: o })));
      return el("tr", {}, el("td", {}, select("tier", product.tiers)), el("td", {}, kind),
        el("td", {}, number("start_s")), el("td", {}, number("duration_s")), el("td", {}, up), el("td", {}, errors), el("td", {}, slower),
        el("td", {}, el("button", { "aria-label": "remove this incident", title: "remove this incident", onclick: () => { config.incidents.splice(i, 1); incidents(); changedConfig(); }, text: "✕" })));
    }));
  }

  // The server's caps, shown beside the knobs they bound (a larger request is refused).
  const caps = defaults.caps;
  const whole = (n) => Math.round(n).toLocaleString("en-US");
  function capNote() {
    const turns = config.replicas * (config.warmup_s + config.duration_s) * config.turns_per_s;
    const over = config.replicas > caps.replicas || config.warmup_s + config.duration_s > caps.sim_seconds || turns > caps.turns;
    const note = $("caps");
    note.textContent = `This server runs at most ${caps.replicas} replicas, ${caps.sim_seconds} simulated s a replica and ` +
      `${whole(caps.turns)} turns a run; this run is ${whole(turns)} turns` + (over ? " — over a cap: lower a knob." : ".");
    note.className = over ? "warning caps" : "why caps";
    return over;
  }
  function load() {
    const fields = [["turns_per_s", "load (turns per second)", 1], ["duration_s", "duration (s, after the warm-up)", 5], ["warmup_s", "warm-up (s)", 1], ["seed", "seed", 1], ["replicas", `replicas (at most ${caps.replicas})`, 10]];
    $("load").replaceChildren(...fields.map(([field, label, step]) => el("label", {}, label,
      el("input", { type: "number", id: `load-${field}`, step, min: field === "seed" ? 0 : step, ...(field === "replicas" ? { max: caps.replicas } : {}), value: config[field], onchange: (e) => { config[field] = Number(e.target.value); capNote(); changedConfig(); } }))),
      el("label", {}, "naive client: attempts", el("input", { type: "number", min: 1, value: config.knobs.naive_attempts, onchange: (e) => { config.knobs.naive_attempts = Number(e.target.value); changedConfig(); } })));
    $("client").value = config.client;
    capNote();
  }

  function everything() {
    $("product").textContent = product.fixture
      ? `Your fixture ${product.fixture}: tiers ${product.tiers.join(", ")}; classes ${product.classes.join(", ")}.`
      : `The shipped fixture: tiers ${product.tiers.join(", ")}; classes ${product.classes.join(", ")}.`;
    $("fixture").value = config.fixture ? config.fixture.text : "";
    stack();
    incidents();
    load();
  }

  function changedConfig() {
    $("status").textContent = "stale: the configuration changed; running again…";
    $("status").className = "status stale";
    document.body.dataset.state = "stale";
    clearTimeout(timer);
    timer = setTimeout(run, 250);
  }

  async function run() {
    const started = performance.now();
    document.body.dataset.state = "running";
    try {
      const r = await LLM.call("run", "/api/sandbox/run", { config });
      current = r;
      render(r, performance.now() - started);
    } catch (error) {
      if (error.name === "AbortError" || error.status === 409) return;
      if (LLM.retryLater(error, $("status"), run)) return;
      $("status").textContent = `error: ${error.message}`;
      $("status").className = "status error";
      document.body.dataset.state = "error";
    }
  }

  const m = (r, name) => r.metrics[name];
  // The headline cards: [name, label, unit, value].
  function headline(r) {
    return [
      ["turns_answered", "turns answered", "", m(r, "turns_answered")],
      ["calls_per_turn", "LLM calls per turn (as made)", "", r.calls_per_turn],
      ["turn_completion_ratio", "turns answered (share)", "share", m(r, "turn_completion_ratio")],
      ["answered_turns_per_s", "goodput", "turns/s", m(r, "answered_turns_per_s")],
      ["wasted_usd", "wasted", "USD", m(r, "wasted_usd")],
      ["wasted_ratio", "wasted share of spend", "share", m(r, "wasted_ratio")],
      ["attempts", "attempts", "", m(r, "attempts")],
      ["retry_ratio", "retry share of attempts", "share", m(r, "retry_ratio")],
      ["calls_failed_http_429", "calls ended on 429", "", m(r, "calls_failed_http_429")],
      ["calls_failed_http_529", "calls ended on 529", "", m(r, "calls_failed_http_529")],
      ["calls_failed_http_500", "calls ended on 500", "", m(r, "calls_failed_http_500")],
      ["breaker_trips", "breaker trips", "", m(r, "breaker_trips")],
    ];
  }

  function render(r, wall) {
    $("status").textContent = `${r.replicas} replicas, seed ${r.seed}, ${r.window_s} s after a ${r.warmup_s} s warm-up: ${r.elapsed_ms.toFixed(0)} ms on the server, ${wall.toFixed(0)} ms here`;
    $("status").className = "status";
    $("warnings").replaceChildren(...r.warnings.map((w) => el("p", { class: "warning", text: `⚠ ${w}` })));
    LLM.cards($("cards"), headline(r).map(([name, label, unit, value]) => ({ name, label, unit, value })));
    compare();
    product = r.product;
    $("classes").replaceChildren(...product.classes.map((c) => el("tr", { "data-class": c },
      el("td", { text: c }), el("td", { class: "num", text: LLM.interval(m(r, `${c}_offered`)) }), el("td", { class: "num", text: LLM.interval(m(r, `${c}_served`)) }),
      el("td", { class: "num", text: LLM.interval(m(r, `${c}_shed_ratio`), "share") }),
      el("td", { class: "num", text: LLM.number(r.latency[`${c}_total_s`].p50) }), el("td", { class: "num", text: LLM.number(r.latency[`${c}_total_s`].p95) }))));
    $("funnel").replaceChildren(...r.funnel.filter((f) => f.calls[0] > 0).map((f) => el("tr", {},
      el("td", { text: f.stage }), el("td", { text: f.reason }), el("td", { class: "num", text: LLM.interval(f.calls) }))));
    const windows = r.incidents.map((i) => ({ start: i.start_s, end: i.start_s + i.duration_s, label: `${i.kind} of ${i.tier}` }));
    $("series").replaceChildren();
    const s = r.series;
    LLM.series($("series"), "Attempts per second (all classes, warm-up included)", "/s", s.bucket_s, [{ label: "attempts", colour: "#0072b2", values: s.series.attempt_rps }], windows);
    LLM.series($("series"), "Goodput: turns answered per second", "turns/s", s.bucket_s, [{ label: "turns answered", colour: "#009e73", values: s.series.goodput_tps }], windows);
    LLM.timeline($("trace"), r.trace, "One trace: the calls around the first incident, one row each (turn's calls share a colour of label)");
    $("toml").value = r.toml;
    document.body.dataset.state = "ready";
    document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
  }

  function compare() {
    $("unpin").hidden = !pinned;
    if (!pinned || !current) return $("comparison").replaceChildren();
    const pinnedValues = Object.fromEntries(headline(pinned).map(([name, , , value]) => [name, value]));
    const rows = headline(current).map(([name, label, unit, value]) => {
      const before = pinnedValues[name];
      const differs = LLM.significant(before, value);
      return el("tr", { "data-metric": name, "data-significant": differs },
        el("td", { text: label }), el("td", { class: "num", text: LLM.interval(before, unit) }), el("td", { class: "num", text: LLM.interval(value, unit) }),
        el("td", { class: differs ? "significant" : "", text: differs ? "significant (Welch, 5%)" : "within noise" }));
    });
    $("comparison").replaceChildren(el("h3", { text: "Pinned run vs this one" }),
      el("table", { class: "compare" }, el("thead", {}, el("tr", {}, el("th", { text: "figure" }), el("th", { class: "num", text: "pinned" }), el("th", { class: "num", text: "this run" }), el("th", { text: "difference" }))), el("tbody", {}, ...rows)));
  }

  $("client").onchange = (e) => { config.client = e.target.value; changedConfig(); };
  $("add-incident").onclick = () => {
    const tier = product.tiers.includes("sonnet") ? "sonnet" : product.tiers[0];
    config.incidents.push({ tier, kind: "brownout", start_s: 20, duration_s: 10 });
    incidents();
    changedConfig();
  };
  $("run").onclick = run;
  $("pin").onclick = () => { pinned = current; compare(); };
  $("unpin").onclick = () => { pinned = null; compare(); };
  $("export").onclick = async () => {
    const r = await LLM.call("export", "/api/sandbox/toml", { config });
    $("toml").value = r.toml;
    const link = $("download");
    link.href = URL.createObjectURL(new Blob([r.toml], { type: "application/toml" }));
    link.hidden = false;
    // The scenario names the fixture by its path: download it to keep them side by side.
    const fixture = $("download-fixture");
    fixture.hidden = !r.fixture;
    if (r.fixture) {
      fixture.href = URL.createObjectURL(new Blob([r.fixture.text], { type: "application/toml" }));
      fixture.download = r.fixture.file.split("/").pop();
      fixture.textContent = `download ${r.fixture.file} (the fixture it names, beside it)`;
    }
  };
  $("fixture-file").onchange = async (e) => { const file = e.target.files[0]; if (file) $("fixture").value = await file.text(); };
  $("load-toml").onclick = async () => {
    try {
      const r = await LLM.call("load", "/api/sandbox/load", { toml: $("toml").value, fixture: $("fixture").value || null });
      config = r.config;
      product = r.product;
      everything();
      changedConfig();
    } catch (error) {
      $("status").textContent = `cannot load: ${error.message}`;
      $("status").className = "status error";
    }
  };
  everything();
  run();
})();
