"use strict";
// Heatmap metric choice: show the chosen option's figures, hide the others.
document.querySelectorAll("select[data-choice]").forEach(function (select) {
  select.addEventListener("change", function () {
    document.querySelectorAll('[data-option="' + select.dataset.choice + '"]').forEach(function (option) {
      option.hidden = option.dataset.index !== select.value;
    });
  });
});
// Each plot's CSV, offered as a download made in the page (no request leaves it).
document.querySelectorAll("a.csv").forEach(function (link) {
  link.addEventListener("click", function () {
    var text = document.getElementById(link.dataset.csv).textContent;
    link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  });
});
// What the page holds, for tests and for anyone checking: plots, and plots with data.
(function () {
  var plots = document.querySelectorAll("figure.plot");
  var drawn = Array.prototype.filter.call(plots, function (f) {
    return Number(f.dataset.points) > 0 && f.querySelector("svg") !== null;
  });
  document.body.dataset.plots = String(plots.length);
  document.body.dataset.plotsWithData = String(drawn.length);
  // Resources the page fetched: a self-contained page fetches none.
  document.body.dataset.resources = String(performance.getEntriesByType("resource").length);
  document.body.dataset.ready = "yes";
})();
