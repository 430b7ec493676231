// The Learn page: the experiment list from /api/learn, knobs that rerun the current
// experiment (the newer request cancels the older, here and on the server), and the
// result drawn with llm.js.
"use strict";

(async () => {
  const $ = (id) => document.getElementById(id);
  const { el } = LLM;
  const { experiments } = await LLM.call("list", "/api/learn");
  const state = { index: 0, knobs: experiments.map(() => ({})), done: new Set(JSON.parse(localStorage.getItem("learn-done") || "[]")) };
  let timer = null;

  function steps() {
    $("steps").replaceChildren(...experiments.map((e, i) => el("li", {},
      el("button", { class: state.done.has(e.id) ? "done" : "", "aria-current": i === state.index ? "step" : "false", onclick: () => show(i), text: e.title }))));
  }

  function knobs(e) {
    const values = state.knobs[state.index];
    $("knobs").replaceChildren(...e.knobs.map((k) => {
      const value = values[k.id] ?? k.default;
      const shown = (v) => (k.choices.length ? k.choices[v] : `${v}${k.unit ? " " + k.unit : ""}`);
      const output = el("output", { text: shown(value) });
      const input = el("input", { type: "range", min: k.min, max: k.max, step: k.step, value, "data-knob": k.id, "aria-label": k.label,
        oninput: () => { values[k.id] = Number(input.value); output.textContent = shown(Number(input.value)); schedule(); } });
      return el("label", {}, el("span", {}, `${k.label}: `, output), input);
    }));
  }

  function show(i) {
    state.index = i;
    const e = experiments[i];
    history.replaceState(null, "", `#${e.id}`);
    $("title").textContent = e.title;
    $("takeaway").textContent = e.takeaway;
    $("previous").disabled = i === 0;
    $("next").disabled = i === experiments.length - 1;
    steps();
    knobs(e);
    run();
  }

  function schedule() {
    $("status").textContent = "stale: the knobs changed; running again…";
    $("status").className = "status stale";
    clearTimeout(timer);
    timer = setTimeout(run, 120);
  }

  async function run() {
    const e = experiments[state.index];
    const started = performance.now();
    $("status").textContent = $("status").textContent || "running…";
    document.body.dataset.state = "running";
    try {
      const r = await LLM.call("run", `/api/learn/${e.id}`, { knobs: state.knobs[state.index], replicas: 100 });
      if (r.id !== experiments[state.index].id) return;
      render(r, performance.now() - started);
    } catch (error) {
      if (error.name === "AbortError" || error.status === 409) return; // a newer run replaced it
      if (LLM.retryLater(error, $("status"), run)) return;
      $("status").textContent = `error: ${error.message}`;
      $("status").className = "status error";
      document.body.dataset.state = "error";
    }
  }

  function render(r, wall) {
    $("replicas").textContent = r.replicas;
    $("setup").textContent = r.setup;
    $("status").textContent = `${r.replicas} replicas, seed ${r.seed}: ${r.elapsed_ms.toFixed(0)} ms on the server, ${wall.toFixed(0)} ms here`;
    $("status").className = "status";
    LLM.cards($("cards"), r.cards);
    LLM.timeline($("timeline"), r.timeline, "Each row a request; each bar an attempt, coloured by outcome; dotted: waiting");
    LLM.histogram($("histogram"), r.timeline);
    $("happened").textContent = r.happened;
    $("checks-block").hidden = r.checks.length === 0;
    $("checks").replaceChildren(...r.checks.map((c) => el("tr", { "data-holds": c.holds },
      el("td", { text: c.what }), el("td", { text: c.formula }), el("td", { class: "num", text: (c.compare === "AtMost" ? "≤ " : "") + LLM.number(c.expected) }),
      el("td", { class: "num", text: LLM.interval(c.measured) }),
      el("td", { class: c.holds ? "holds" : "fails", text: verdict(c) }))));
    $("toml").textContent = r.toml;
    state.done.add(r.id);
    localStorage.setItem("learn-done", JSON.stringify([...state.done]));
    steps();
    document.body.dataset.state = "ready";
    document.body.dataset.runs = String(Number(document.body.dataset.runs || 0) + 1);
  }

  // Inside the 95% interval, or how far outside: one check in twenty lands outside by chance.
  function verdict(c) {
    if (c.holds) return c.compare === "AtMost" ? "within the bound" : "inside the interval";
    const z = c.z === null ? "all replicas agree" : `${Math.abs(c.z).toFixed(1)} standard errors away`;
    return c.z !== null && Math.abs(c.z) < 3.3 ? `just outside (${z}): a 95% interval misses one time in twenty` : `does not hold (${z})`;
  }

  $("previous").onclick = () => show(Math.max(0, state.index - 1));
  $("next").onclick = () => show(Math.min(experiments.length - 1, state.index + 1));
  $("reset").onclick = () => { state.knobs[state.index] = {}; knobs(experiments[state.index]); run(); };
  const start = experiments.findIndex((e) => `#${e.id}` === location.hash);
  show(start < 0 ? 0 : start);
})();
