// slidewin dashboard: the charts of the rule cards, stacked areas drawn by uPlot. Plain JS;
// dashboard.js uses what `SlidewinCharts` returns.
const SlidewinCharts = (function () {
  "use strict";

  const NUM = new Intl.NumberFormat("en-US");

  // ---- colours, from the stylesheet's variables ----
  function palette() {
    const s = getComputedStyle(document.documentElement);
    const v = (name) => s.getPropertyValue(name).trim();
    return {
      passed: v("--c-passed"),
      denied: v("--c-denied"),
      shadow_denied: v("--c-shadow"),
      "limit-1": v("--c-limit-1"),
      "limit-2": v("--c-limit-2"),
      "limit-3": v("--c-limit-3"),
      "limit-4": v("--c-limit-4"),
      muted: v("--muted"),
      grid: v("--grid"),
      font: "11px " + (v("--sans") || "sans-serif"),
    };
  }

  function alpha(color, a) {
    const m = /^#([0-9a-f]{6})$/i.exec(color);
    if (!m) return color;
    const n = parseInt(m[1], 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // ---- charts ----
  const Y_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1e3, 2e3, 2500, 5e3, 1e4, 2e4, 5e4,
    1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 1e9];

  function compact(v) {
    if (v >= 1e6) return +(v / 1e6).toFixed(1) + "M";
    if (v >= 1e4) return +(v / 1e3).toFixed(1) + "k";
    return NUM.format(v);
  }

  // What a card's chart stacks, bottom up: passed, then what was over the limit. A rule of
  // several limits has its denials (or shadow denials) split by the limit that found them,
  // in the limits' colours, and what no limit found (the store's refusals) as "other".
  const LIMIT_TONES = 4; // --c-limit-1 … --c-limit-4, in turn

  function limitTone(i) {
    return "limit-" + ((i % LIMIT_TONES) + 1);
  }

  function layers(rule, p, d, s, showDenied, showShadow) {
    const out = [{ key: "passed", label: "passed", tone: "passed", values: p }];
    const limits = Array.isArray(rule.limits) ? rule.limits : [];
    const split = (values, label, tone) => {
      if (limits.length < 2) {
        out.push({ key: label, label: label, tone: tone, values: values });
        return;
      }
      const rest = values.slice();
      limits.forEach((limit, i) => {
        const over = values.map((_, j) => Number((limit.over_limit || [])[j]) || 0);
        over.forEach((v, j) => { rest[j] -= v; });
        out.push({
          key: label + "\u0000" + limit.name,
          label: label + " by " + limit.name,
          tone: limitTone(i),
          values: over,
        });
      });
      if (rest.some((v) => v > 0)) {
        out.push({ key: label + "\u0000", label: label + " by the store", tone: "muted",
          values: rest.map((v) => Math.max(0, v)) });
      }
    };
    if (showDenied) split(d, "denied", "denied");
    if (showShadow) split(s, "shadow denied", "shadow_denied");
    return out;
  }

  // uPlot's data for `layers` stacked: each series is the sum of its layer and those below.
  function stacked(xs, layers) {
    const data = [xs];
    let below = xs.map(() => 0);
    for (const layer of layers) {
      below = below.map((v, i) => v + layer.values[i]);
      data.push(below);
    }
    return data;
  }

  // Draws `card.layers` stacked over `card.xs` into `card.chart`, `height` pixels high;
  // `onCursor(idx)` is told where the cursor is.
  function makePlot(card, height, onCursor) {
    const c = palette();
    const series = [{}];
    const bands = [];
    card.layers.forEach((layer, i) => {
      const color = c[layer.tone];
      series.push({
        label: layer.label,
        stroke: color,
        fill: alpha(color, layer.key === "passed" ? 0.18 : 0.32),
        width: 1.4,
        points: { show: false },
      });
      // Each layer fills down to the one below it, not to zero: stacked, never overlapping.
      if (i > 0) bands.push({ series: [i + 1, i] });
    });
    const axis = {
      stroke: c.muted,
      font: c.font,
      grid: { stroke: c.grid, width: 1 },
      ticks: { show: false },
    };
    const opts = {
      width: Math.max(200, card.chart.clientWidth),
      height: height,
      legend: { show: false },
      padding: [10, 18, 0, 0],
      cursor: { drag: { x: false, y: false, setScale: false }, points: { size: 6 } },
      scales: {
        x: { time: true },
        y: { range: (u, min, max) => [0, Math.max(4, max * 1.12)] },
      },
      axes: [
        // Seconds before the newest: "−45s", "−30s", "−15s", "now".
        Object.assign({}, axis, {
          size: 26,
          splits: (u, i, min, max) => {
            const out = [];
            for (let v = max; v >= min; v -= 15) out.unshift(v);
            return out;
          },
          values: (u, splits) => splits.map((v) => {
            const back = Math.round(u.scales.x.max - v);
            return back === 0 ? "now" : "\u2212" + back + "s";
          }),
        }),
        Object.assign({}, axis, { size: 46, space: 30, incrs: Y_STEPS,
          values: (u, vals) => vals.map(compact) }),
      ],
      series: series,
      bands: bands,
      hooks: {
        setCursor: [(u) => onCursor(u.cursor.idx)],
      },
    };
    card.plot = new uPlot(opts, stacked(card.xs, card.layers), card.chart);
  }


  return { layers, stacked, makePlot, limitTone };
})();
