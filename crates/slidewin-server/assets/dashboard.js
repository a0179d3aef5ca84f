// slidewin dashboard: draws each snapshot of GET api/events (server-sent events, one a second).
// Plain JS, no framework. Every text from the server goes into the DOM through textContent or
// setAttribute, never innerHTML.
(function () {
  "use strict";

  const NUM = new Intl.NumberFormat("en-US");
  const PCT = new Intl.NumberFormat("en-US", { style: "percent", maximumFractionDigits: 1 });
  const CHART_HEIGHT = 150;
  const STALE_MS = 4000;
  const OUTCOMES = [
    ["passed", "passed"],
    ["denied", "denied"],
    ["shadow_denied", "shadow denied"],
  ];

  // `?updates=N` stops after N snapshots and keeps the page as it is then: a still picture for
  // screenshots, and what lets headless Chromium's virtual time run out (an open event stream
  // is a fetch still pending, which stops virtual time).
  const UPDATES = (() => {
    const n = Number(new URLSearchParams(location.search).get("updates"));
    return Number.isInteger(n) && n > 0 ? n : Infinity;
  })();
  let received = 0;

  const cards = new Map(); // rule id -> card
  let lastMessageAt = 0;
  let source = null;
  let retryMs = 1000;

  function $(id) {
    return document.getElementById(id);
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function setText(node, text) {
    const value = String(text);
    if (node.textContent !== value) node.textContent = value;
  }

  function num(n) {
    return NUM.format(Number(n) || 0);
  }

  function sum(values) {
    let total = 0;
    for (const v of values || []) total += Number(v) || 0;
    return total;
  }

  // A time of day with its zone ("14:03:05 CET"): a time without one is read in the wrong
  // zone by whoever looks from elsewhere.
  function clock(ms) {
    const d = new Date(ms);
    return d.toLocaleTimeString("en-GB", {
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    });
  }

  function ago(fromMs, nowMs) {
    const s = Math.max(0, Math.round((nowMs - fromMs) / 1000));
    if (s < 60) return s + " s ago";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min ago";
    const h = Math.floor(m / 60);
    if (h < 48) return h + " h " + (m % 60) + " min ago";
    return Math.floor(h / 24) + " days ago";
  }

  const { layers, stacked, limitTone } = SlidewinCharts;

  function makePlot(card) {
    SlidewinCharts.makePlot(card, CHART_HEIGHT, (idx) => showReadout(card, idx));
  }

  function showReadout(card, idx) {
    if (idx === null || idx === undefined || !card.xs.length) {
      setText(card.readout, "");
      return;
    }
    const parts = [clock(card.xs[idx] * 1000)];
    for (const layer of card.layers) parts.push(num(layer.values[idx]) + " " + layer.label);
    setText(card.readout, parts.join(" · "));
  }

  // ---- rule cards ----
  function ruleId(rule) {
    return rule.domain + "\u0000" + rule.name;
  }

  function metaItem(label) {
    const span = el("span", null, label + " ");
    const b = el("b");
    span.append(b);
    return [span, b];
  }

  function makeCard(rule) {
    const root = el("article", "card");
    root.setAttribute("data-domain", rule.domain);
    root.setAttribute("data-rule", rule.name);

    const head = el("div", "card-head");
    const title = el("h3", "card-title", rule.name);
    title.title = rule.name;
    const badge = el("span", "badge", "shadow");
    badge.title = "shadow mode: decides but never denies";
    const rate = el("span", "rate-now");
    head.append(title, badge, rate);

    const meta = el("div", "meta");
    const [domainSpan, domain] = metaItem("domain");
    const [quotaSpan, quota] = metaItem("quota");
    quotaSpan.className = "quota";
    const [algoSpan, algorithm] = metaItem("algorithm");
    const [keysSpan, keys] = metaItem("keys");
    meta.append(domainSpan, quotaSpan, algoSpan, keysSpan);

    const totals = el("div", "totals");
    const totalEls = {};
    for (const [key, label] of OUTCOMES) {
      const t = el("div", "t " + key);
      const n = el("span", "num", "0");
      n.setAttribute("data-domain", rule.domain);
      n.setAttribute("data-rule", rule.name);
      n.setAttribute("data-total", key);
      t.append(el("span", "label", label), n);
      totals.append(t);
      totalEls[key] = n;
    }

    const readout = el("div", "readout");
    const wrap = el("div", "chart-wrap");
    const chart = el("div", "chart");
    wrap.append(chart, readout);
    chart.setAttribute("role", "img");
    chart.setAttribute("aria-label", "passed, denied and shadow-denied requests per second over the last minute");

    // A rule of several limits: which of them found requests over it.
    const limits = el("table", "limits");
    limits.hidden = true;
    const limitsHead = el("thead");
    const headRow = el("tr");
    for (const [text, cls] of [["limit", null], ["quota", null], ["algorithm", null],
      ["over it, 1 min", "n"]]) {
      headRow.append(el("th", cls, text));
    }
    limitsHead.append(headRow);
    const limitsBody = el("tbody");
    limits.append(limitsHead, limitsBody);

    root.append(head, meta, totals, limits, wrap);
    const card = {
      root, badge, rate, domain, quota, algorithm, keys, totalEls, readout, chart,
      limits, limitsBody,
      plot: null,
      xs: [],
      layers: [],
      signature: "",
    };
    card.resize = new ResizeObserver(() => {
      if (card.plot) {
        const w = Math.max(200, chart.clientWidth);
        if (w !== card.plot.width) card.plot.setSize({ width: w, height: CHART_HEIGHT });
      }
    });
    card.resize.observe(chart);
    return card;
  }

  function dropCard(id) {
    const card = cards.get(id);
    if (!card) return;
    card.resize.disconnect();
    if (card.plot) card.plot.destroy();
    card.root.remove();
    cards.delete(id);
  }

  function updateCard(card, rule, nowMs) {
    const per = rule.per_second || {};
    const passed = per.passed || [];
    const denied = per.denied || [];
    const shadow = per.shadow_denied || [];
    const n = Math.max(passed.length, denied.length, shadow.length);
    const end = Math.floor(nowMs / 1000);
    const xs = new Array(n);
    const p = new Array(n);
    const d = new Array(n);
    const s = new Array(n);
    for (let i = 0; i < n; i++) {
      xs[i] = end - (n - 1) + i;
      p[i] = Number(passed[i]) || 0;
      d[i] = Number(denied[i]) || 0;
      s[i] = Number(shadow[i]) || 0;
    }

    const totals = rule.last_minute || {
      passed: sum(p), denied: sum(d), shadow_denied: sum(s),
    };
    for (const [key] of OUTCOMES) {
      const node = card.totalEls[key];
      const value = Number(totals[key]) || 0;
      setText(node, num(value));
      node.setAttribute("data-value", String(value));
      node.classList.toggle("zero", value === 0);
    }

    card.root.classList.toggle("is-shadow", !!rule.shadow);
    card.badge.hidden = !rule.shadow;
    setText(card.domain, rule.domain);
    setText(card.quota, rule.quota);
    setText(card.algorithm, String(rule.algorithm).replace(/_/g, " "));
    setText(card.keys, num(rule.keys));
    renderLimits(card, rule);

    // The last whole second: the current one is still filling.
    const k = n >= 2 ? n - 2 : n - 1;
    const rate = k >= 0 ? p[k] + d[k] + s[k] : 0;
    setText(card.rate, "now " + num(rate) + "/s");
    card.rate.title = "decisions in the last whole second";

    // A shadow rule never denies, and only a shadow rule shadow-denies: draw what can happen
    // (and anything that did).
    const showDenied = !rule.shadow || sum(d) > 0;
    const showShadow = !!rule.shadow || sum(s) > 0;
    card.xs = xs;
    card.layers = layers(rule, p, d, s, showDenied, showShadow);
    // A new set of layers (a limit added, a shadow rule that denied) is a new chart.
    const signature = card.layers.map((layer) => layer.key).join("\u0001");
    if (card.plot && signature !== card.signature) {
      card.plot.destroy();
      card.plot = null;
    }
    card.signature = signature;
    if (!card.plot) {
      makePlot(card);
    } else {
      card.plot.setData(stacked(card.xs, card.layers));
    }
    if (card.plot.cursor.idx !== null && card.plot.cursor.idx !== undefined) {
      showReadout(card, card.plot.cursor.idx);
    }
  }

  // The limits of a rule of several, each with the requests it found over it in the last
  // minute and its share of them, in its colour on the chart.
  function renderLimits(card, rule) {
    const limits = Array.isArray(rule.limits) ? rule.limits : [];
    card.limits.hidden = limits.length < 2;
    if (card.limits.hidden) {
      card.limitsBody.replaceChildren();
      return;
    }
    const all = Math.max(1, sum(limits.map((l) => l.last_minute_over_limit)));
    const rows = limits.map((limit, i) => {
      const over = Number(limit.last_minute_over_limit) || 0;
      const tr = el("tr");
      const name = el("td", "limit-name");
      const swatch = el("i", "swatch");
      swatch.style.background = "var(--c-" + limitTone(i) + ")";
      name.append(swatch, el("span", null, limit.name));
      const count = el("td", "n");
      const bar = el("div", "bar");
      const fill = el("i");
      fill.style.width = Math.round((over / all) * 80) + "px";
      fill.style.background = "var(--c-" + limitTone(i) + ")";
      const value = el("span", over ? null : "zero", num(over));
      value.setAttribute("data-rule", rule.name);
      value.setAttribute("data-limit", limit.name);
      value.setAttribute("data-value", String(over));
      bar.append(fill, value);
      count.append(bar);
      tr.append(name, el("td", "quota", limit.quota),
        el("td", null, String(limit.algorithm).replace(/_/g, " ")), count);
      return tr;
    });
    card.limitsBody.replaceChildren(...rows);
  }

  function renderRules(rules, nowMs) {
    const container = $("rules");
    const seen = new Set();
    let previous = null;
    for (const rule of rules) {
      const id = ruleId(rule);
      seen.add(id);
      let card = cards.get(id);
      if (!card) {
        card = makeCard(rule);
        cards.set(id, card);
      }
      // Keep the config's order; move a card only when it is out of place.
      const want = previous ? previous.nextSibling : container.firstChild;
      if (want !== card.root) container.insertBefore(card.root, want);
      previous = card.root;
      updateCard(card, rule, nowMs);
    }
    for (const id of Array.from(cards.keys())) {
      if (!seen.has(id)) dropCard(id);
    }
    const empty = $("rules-empty");
    empty.textContent = "The config has no rules.";
    empty.hidden = rules.length > 0;
    if (!empty.hidden) container.append(empty);
  }

  // ---- header, summary, table ----
  function renderHeader(snap) {
    const config = snap.config || {};
    const backend = snap.backend || {};
    setText($("config-version"), "v" + (config.version ?? "–"));

    const loaded = Date.parse(config.loaded_at);
    const loadedEl = $("config-loaded");
    if (Number.isFinite(loaded)) {
      setText(loadedEl, clock(loaded) + " · " + ago(loaded, snap.now_ms));
    } else {
      setText(loadedEl, config.loaded_at || "–");
    }
    const files = (config.files || []).join("\n");
    loadedEl.title = (config.loaded_at || "") + (files ? "\n" + files : "");

    const errBox = $("config-error");
    if (config.last_error) {
      errBox.hidden = false;
      const at = Date.parse(config.last_error.at);
      let when = Number.isFinite(at) ? clock(at) + " (" + ago(at, snap.now_ms) + ")" : config.last_error.at;
      if (config.errors_total > 1) when += " · " + num(config.errors_total) + " failed loads since start";
      setText($("config-error-at"), when);
      setText($("config-error-message"), config.last_error.message);
    } else {
      errBox.hidden = true;
    }

    setText($("backend-kind"), backend.kind || "–");
    const state = $("backend-state");
    setText(state, backend.state || "–");
    state.className = "pill " + (["up", "down", "probing"].includes(backend.state) ? backend.state : "");
    const policy = backend.failure_policy;
    setText($("backend-policy"),
      policy === "open" ? "open (admit)" : policy === "closed" ? "closed (deny)" : policy || "–");
    setText($("backend-errors"), num(backend.errors_total));
  }

  // Every rule's last minute, summed by the server: the rules shown may be a few of many.
  function renderSummary(snap) {
    const t = snap.last_minute || {};
    const passed = Number(t.passed) || 0;
    const denied = Number(t.denied) || 0;
    const shadow = Number(t.shadow_denied) || 0;
    const second = snap.last_second || {};
    const rate = (Number(second.passed) || 0) + (Number(second.denied) || 0) +
      (Number(second.shadow_denied) || 0);
    setText($("sum-passed"), num(passed));
    setText($("sum-denied"), num(denied));
    setText($("sum-shadow"), num(shadow));
    const all = passed + denied + shadow;
    setText($("sum-ratio"), all ? PCT.format(denied / all) : "–");
    setText($("sum-rate"), num(rate));
  }

  // The server shows the busiest rules of a large config: say how many of how many.
  function renderShown(snap, rules) {
    const node = $("rules-shown");
    const total = Number(snap.rules_total);
    node.hidden = !(Number.isInteger(total) && total > rules.length);
    if (!node.hidden) {
      setText(node, num(rules.length) + " of " + num(total) +
        " rules shown: the busiest in the last minute");
      node.setAttribute("data-rules-shown", String(rules.length));
      node.setAttribute("data-rules-total", String(total));
    }
  }

  function renderTop(top) {
    const body = $("top-body");
    const rows = [];
    const max = Math.max(1, ...top.map((t) => Number(t.denied) || 0));
    for (const t of top) {
      const tr = el("tr");
      tr.append(el("td", null, t.domain), el("td", null, t.rule), el("td", null, t.limit),
        el("td", "key", t.key));
      const td = el("td", "n");
      const bar = el("div", "bar");
      const i = el("i");
      i.style.width = Math.max(2, Math.round(((Number(t.denied) || 0) / max) * 120)) + "px";
      const n = el("span", null, num(t.denied));
      n.setAttribute("data-top-denied", String(Number(t.denied) || 0));
      bar.append(i, n);
      td.append(bar);
      tr.append(td);
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    $("top-empty").hidden = rows.length > 0;
  }

  function render(snap) {
    const rules = Array.isArray(snap.rules) ? snap.rules : [];
    renderHeader(snap);
    renderSummary(snap);
    renderShown(snap, rules);
    renderRules(rules, Number(snap.now_ms) || Date.now());
    renderTop(Array.isArray(snap.top_denied) ? snap.top_denied : []);
    setText($("updated"), "snapshot of " + clock(Number(snap.now_ms) || Date.now()));
  }

  // ---- the connection ----
  function setConn(state, text) {
    const conn = $("conn");
    conn.className = "conn " + state;
    setText($("conn-text"), text);
  }

  // Whether the server refuses this page's credentials (its cookie, sent with every same-origin
  // request; the token itself is never in reach of this script: the cookie is HttpOnly).
  function unauthorized() {
    return fetch("api/stats", { method: "HEAD", cache: "no-store" })
      .then((response) => response.status === 401)
      .catch(() => false);
  }

  // The server takes `?token=` out of the address by a redirect; should one stay (a page
  // saved with it), take it out of the address bar and the history here too.
  if (new URLSearchParams(location.search).has("token") && window.history.replaceState) {
    const params = new URLSearchParams(location.search);
    params.delete("token");
    const query = params.toString();
    window.history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
  }

  function connect() {
    setConn("connecting", "connecting…");
    source = new EventSource("api/events");
    source.onopen = () => {
      retryMs = 1000;
    };
    source.onmessage = (e) => {
      let snap;
      try {
        snap = JSON.parse(e.data);
      } catch (err) {
        setConn("lost", "bad snapshot");
        return;
      }
      lastMessageAt = Date.now();
      received += 1;
      if (received >= UPDATES) {
        source.close();
        source = null;
        setConn("paused", "paused after " + num(received) + (received === 1 ? " update" : " updates"));
      } else {
        setConn("live", "live");
      }
      render(snap);
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (e.g. 503: too many dashboards open): the browser gives up; we retry,
        // unless the refusal is a 401 (an admin token is needed, or it changed): then retrying
        // cannot help, and the page says how to get in.
        source = null;
        unauthorized().then((refused) => {
          if (refused) {
            setConn("lost", "admin token needed · open this page again with ?token=…");
            return;
          }
          setConn("lost", "disconnected · retrying in " + Math.round(retryMs / 1000) + " s");
          setTimeout(connect, retryMs);
          retryMs = Math.min(retryMs * 2, 30000);
        });
      } else {
        setConn("lost", "reconnecting…");
      }
    };
  }

  setInterval(() => {
    if (lastMessageAt && source && Date.now() - lastMessageAt > STALE_MS) {
      setConn("lost", "no update for " + Math.round((Date.now() - lastMessageAt) / 1000) + " s");
    }
  }, 1000);

  // Charts take their colours once: rebuild them when the colour scheme changes.
  window.matchMedia("(prefers-color-scheme: light)").addEventListener("change", () => {
    for (const card of cards.values()) {
      if (card.plot) {
        card.plot.destroy();
        card.plot = null;
        makePlot(card);
      }
    }
  });

  connect();
})();
