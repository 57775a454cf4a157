// The simulation page's charts across the days, drawn with uPlot from
// the report's JSON (report.json of `fano simulate`).
"use strict";

(function () {
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
  const PALETTE = ["--c1", "--c2", "--c3", "--c4", "--c5", "--c6"];

  function chart(id, days, series) {
    const box = document.getElementById(id);
    const width = Math.max(280, box.clientWidth || 600);
    const axis = { stroke: cssVar("--fg"), grid: { stroke: cssVar("--line") }, ticks: { stroke: cssVar("--line") } };
    const opts = {
      width: width, height: 220,
      scales: { x: { time: false, range: (u, min, max) => [min - 0.5, max + 0.5] }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
      axes: [Object.assign({}, axis, { splits: () => days, values: (u, ticks) => ticks.map((d) => "day " + d), label: "day of the run" }),
        Object.assign({}, axis, { size: 48 })],
      series: [{ label: "day", value: (u, v) => v == null ? "" : "day " + v }].concat(series.map((s, i) => ({
        // Lines with a point per day: several series side by side stay
        // readable (bars of two series would overlap).
        label: s.label, stroke: cssVar(PALETTE[i % PALETTE.length]), width: 2,
        points: { show: true, size: 7, fill: cssVar(PALETTE[i % PALETTE.length]) },
      }))),
    };
    box.replaceChildren();
    new window.uPlot(opts, [days].concat(series.map((s) => s.values)), box);
  }

  async function draw() {
    const r = await (await fetch("/simulation/report.json")).json();
    const days = r.days.map((d) => d.day);
    const backends = [...new Set(r.days.flatMap((d) => Object.keys(d.quota_used || {})))].sort();
    chart("sim-quota", days, backends.map((b) => ({ label: b, values: r.days.map((d) => (d.quota_used || {})[b] || 0) })));
    chart("sim-written", days, [
      { label: "insights blessed", values: r.days.map((d) => d.insights_blessed || 0) },
      { label: "sections written", values: r.days.map((d) => d.sections_written || 0) },
      { label: "sections revised", values: r.days.map((d) => d.sections_revised || 0) }]);
    chart("sim-tasks", days, [
      { label: "completed", values: r.days.map((d) => d.tasks_completed || 0) },
      { label: "failed", values: r.days.map((d) => d.tasks_failed || 0) }]);
  }
  draw().catch((e) => {
    for (const id of ["sim-quota", "sim-written", "sim-tasks"]) document.getElementById(id).textContent = "The report could not be read: " + e.message;
  });
})();
