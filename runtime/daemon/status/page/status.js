// dype's status page: polls GET /v2/dype/status once a second (never more: the next request is
// sent a second after the previous answer) and draws what it says. Charts are uPlot's; the
// pipeline is plain HTML boxes. A token given as /ui/#token=<t> is sent as "Authorization: Bearer".
"use strict";
(function () {
  const POLL_MS = 1000;
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  const views = new Map();  // model name -> its section and charts
  let previousBusy = null;  // the last poll's busy counters: busy share since then
  let polls = 0;

  // --- Small helpers -----------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function seconds(s) {
    if (s === null || s === undefined || !isFinite(s)) return "?";
    if (s >= 1) return s.toFixed(2) + " s";
    if (s >= 1e-3) return (s * 1e3).toFixed(2) + " ms";
    return (s * 1e6).toFixed(1) + " µs";
  }

  function num(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return "?";
    const a = Math.abs(v);
    if (a >= 1e6 || (a > 0 && a < 1e-2)) return v.toExponential(2);
    return v.toFixed(digits === undefined ? (a >= 100 ? 0 : 2) : digits);
  }

  function percent(v) {
    if (v === null || v === undefined || !isFinite(v)) return "n/a";
    return (v >= 0 ? "+" : "") + (v * 100).toFixed(1) + "%";
  }

  function shareBar(share, title) {
    const s = Math.max(0, Math.min(1, share || 0));
    return el("span", {title: title},
      el("span", {class: "bar-track"}, el("span", {class: "bar", style: "width:" + (s * 80).toFixed(0) + "px"})),
      (s * 100).toFixed(0) + "%");
  }

  function chartWidth(container) {
    return Math.max(320, Math.floor(container.getBoundingClientRect().width || 480));
  }

  // --- Devices -----------------------------------------------------------------------------------

  function renderDevices(status) {
    const tbody = document.querySelector("#devices tbody");
    const busy = status.busy || {devices: {}, uptime_s: 0, modelled_span_s: 0};
    const rows = [];
    for (const d of status.devices || []) {
      const b = busy.devices[d.name] || {measured_s: 0, modelled_s: 0};
      // Emulated devices: their busy time is on the emulated clocks (modelled); others measured.
      const modelled = b.modelled_s > 0;
      const since = modelled ? b.modelled_s / Math.max(busy.modelled_span_s, 1e-12)
                             : b.measured_s / Math.max(busy.uptime_s, 1e-12);
      let recent = null;
      const p = previousBusy && previousBusy.devices[d.name];
      if (p) {
        const span = modelled ? busy.modelled_span_s - previousBusy.modelled_span_s : busy.uptime_s - previousBusy.uptime_s;
        const used = modelled ? b.modelled_s - p.modelled_s : b.measured_s - p.measured_s;
        recent = span > 0 ? used / span : 0;
      }
      const source = modelled ? "modelled (emulated clock)" : "measured (wall clock)";
      const planning = d.planning || {};
      const plannable = planning.planned === false
        ? el("span", {class: "no", title: planning.profile}, "no: " + (planning.why_not || "?"))
        : el("span", {title: planning.profile || ""}, "yes");
      const state = [];
      if (d.failed) state.push("failed");
      if (d.drained) state.push("drained");
      if (d.bitstream !== undefined) state.push("image " + d.bitstream);
      if (d.host) state.push("on " + d.host);
      if (!state.length) state.push("in service");
      rows.push(el("tr", {"data-device": d.name, "data-kind": d.kind},
        el("td", {class: "mono"}, d.name),
        el("td", {class: "kind-" + d.kind}, d.kind + (d.planned_as && d.planned_as !== d.kind ? " (as " + d.planned_as + ")" : "")),
        el("td", {}, d.product || planning.profile || ""),
        el("td", {}, plannable),
        el("td", {}, recent === null ? "…" : shareBar(recent, source)),
        el("td", {}, shareBar(since, source)),
        el("td", {class: "num", title: d.energy_source || ""},
           d.energy_j === undefined ? "n/a" : num(d.energy_j) + " J " + (d.energy_source === "modelled" ? "(modelled)" : "")),
        el("td", {class: d.drained || d.failed ? "no" : ""}, state.join(", "))));
    }
    tbody.replaceChildren(...rows);
    previousBusy = busy;
    const note = document.getElementById("devices-note");
    note.textContent = status.devices_age_s === null
      ? "devices are read between admin calls: none read yet"
      : status.devices_age_s > 2 ? "devices as read " + status.devices_age_s.toFixed(0) + " s ago (an admin change is running)" : "";
  }

  // --- One model ---------------------------------------------------------------------------------

  function modelView(name) {
    let v = views.get(name);
    if (v) return v;
    const section = el("div", {class: "model", "data-model": name});
    const head = el("div", {class: "model-head"});
    const pipeline = el("div", {class: "pipeline"});
    const throughput = el("div", {class: "chart-throughput"});
    const replans = el("ol", {class: "replans", reversed: ""});  // newest first, numbered from the oldest
    const pareto = el("div", {class: "chart-pareto"});
    const paretoNote = el("p", {class: "muted pareto-note"});
    const drift = el("table", {class: "drift"});
    const driftNote = el("p", {class: "muted drift-note"});
    section.append(head,
      el("h3", {}, "Current plan: stages on device lanes (per request: predicted, measured)"), pipeline,
      el("div", {class: "row"},
        el("div", {}, el("h3", {}, "Measured throughput per plan epoch, and re-plans"), throughput, replans),
        el("div", {}, el("h3", {}, "Pareto front of the current workload (modelled)"), pareto, paretoNote)),
      el("h3", {}, "Drift signals: what the detector watches, against its thresholds"), drift, driftNote);
    document.getElementById("models").append(section);
    v = {section, head, pipeline, throughput, replans, pareto, paretoNote, drift, driftNote, charts: {}};
    views.set(name, v);
    return v;
  }

  function renderHead(v, m) {
    v.head.replaceChildren(
      el("h2", {}, m.model),
      el("span", {class: "mnemonic", "data-role": "label", title: m.pipeline}, m.label),
      el("span", {}, "epoch " + m.epoch),
      el("span", {class: "muted"}, m.pipeline),
      el("span", {class: "muted"}, m.requests.completed + " requests answered, " + m.requests.failed + " failed"),
      el("span", {class: "muted", title: "where the plan's kernel times come from"}, "costs: " + m.cost_source));
  }

  function renderPipeline(v, m, devices) {
    const kinds = new Map(devices.map((d) => [d.name, d.kind]));
    const used = new Set(m.stages.flatMap((s) => s.devices));
    // Every device is a lane, so the idle ones show; before devices are read, the plan's alone.
    const lanes = devices.length ? devices.map((d) => d.name) : Array.from(used);
    v.pipeline.style.gridTemplateColumns = "max-content repeat(" + m.stages.length + ", minmax(120px, 1fr))";
    const cells = [el("div", {})];
    m.stages.forEach((s, i) => cells.push(el("div", {class: "stage-head"}, "stage " + (i + 1))));
    for (const lane of lanes) {
      cells.push(el("div", {class: "lane-name" + (used.has(lane) ? "" : " muted")}, lane));
      m.stages.forEach((s, i) => {
        if (!s.devices.includes(lane)) {
          cells.push(el("div", {class: "lane-bg"}));
          return;
        }
        const kernels = s.kernels[0] === s.kernels[1] ? s.kernels[0] : s.kernels[0] + " … " + s.kernels[1];
        const times = ["pred " + seconds(s.predicted_s)];
        if (s.measured_s !== undefined) times.push("meas " + seconds(s.measured_s));
        if (s.modelled_s !== undefined) times.push("emu " + seconds(s.modelled_s));
        cells.push(el("div", {class: "stage " + (kinds.get(lane) || ""), "data-stage": i + 1,
                              title: "kernels " + s.first + "-" + s.last + " on " + s.devices.join("+") +
                                     "\npredicted (modelled) " + seconds(s.predicted_s) +
                                     "\nmeasured wall time per request " + seconds(s.measured_s) +
                                     (s.modelled_s !== undefined ? "\nemulated devices' time " + seconds(s.modelled_s) : "")},
          el("div", {class: "k"}, kernels), el("div", {class: "t"}, times.join(" · "))));
      });
    }
    v.pipeline.replaceChildren(...cells);
  }

  // Throughput per epoch as steps over the daemon's clock, re-plans as marked vertical lines.
  function renderThroughput(v, m) {
    const epochs = m.epochs.filter((e) => e.requests > 0).sort((a, b) => a.first_s - b.first_s);
    const xs = [], tp = [], joules = [];
    epochs.forEach((e, i) => {
      xs.push(e.first_s);
      tp.push(e.requests > 1 ? e.throughput_per_s : null);
      joules.push(e.modelled_energy_j_per_inference > 0 ? e.modelled_energy_j_per_inference : null);
      if (i === epochs.length - 1) {
        xs.push(Math.max(e.last_s, e.first_s + 1e-3));
        tp.push(tp[tp.length - 1]);
        joules.push(joules[joules.length - 1]);
      }
    });
    const startOf = new Map(epochs.map((e) => [e.epoch, e.first_s]));
    const marks = m.replans.filter((r) => r.swapped && r.cause !== "initial" && startOf.has(r.new_epoch))
                           .map((r) => ({x: startOf.get(r.new_epoch), cause: r.cause, plan: r.new_plan}));
    const data = [xs, tp, joules];
    if (!v.charts.throughput) {
      const opts = {
        width: chartWidth(v.throughput), height: 220,
        scales: {x: {time: false}},
        axes: [{label: "seconds since start (measured)"},
               {label: "requests/s (measured)", scale: "y"},
               {label: "J/inference (modelled)", scale: "j", side: 1, grid: {show: false}}],
        series: [{label: "t (s)"},
                 {label: "throughput", scale: "y", stroke: "#3b7dd8", width: 2, fill: "rgba(59,125,216,0.12)",
                  paths: uPlot.paths.stepped({align: 1})},
                 {label: "energy", scale: "j", stroke: "#d8833b", width: 1.5, dash: [4, 3],
                  paths: uPlot.paths.stepped({align: 1})}],
        hooks: {draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.font = (11 * devicePixelRatio) + "px sans-serif";
          for (const mk of u._marks || []) {
            const x = u.valToPos(mk.x, "x", true);
            ctx.strokeStyle = "#c0392b";
            ctx.setLineDash([3 * devicePixelRatio, 3 * devicePixelRatio]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillStyle = "#c0392b";
            ctx.fillText(mk.cause + " → " + mk.plan, x + 3 * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
          }
          ctx.restore();
        }]},
      };
      v.charts.throughput = new uPlot(opts, data, v.throughput);
    }
    v.charts.throughput._marks = marks;
    v.charts.throughput.setData(data);

    // The re-plans, newest first, each with the throughput measured under the plans before and after.
    const measured = new Map(m.epochs.map((e) => [e.epoch, e]));
    const rate = (epoch) => {
      const e = measured.get(epoch);
      return e && e.requests > 1 ? num(e.throughput_per_s, 1) + "/s" : "?";
    };
    const items = m.replans.slice().reverse().map((r) => {
      const gain = r.predicted_gain === null ? "n/a (the old plan breaks the mode's constraint)" : percent(r.predicted_gain);
      const after = r.swapped
        ? "measured " + rate(r.old_epoch) + " → " + rate(r.new_epoch)
        : "kept: not better by the hysteresis";
      return el("li", {"data-cause": r.cause, "data-swapped": String(r.swapped), class: r.swapped ? "" : "kept",
                       title: r.detail},
        el("span", {class: "cause"}, r.cause), " at request " + r.at_request + ": ",
        el("b", {}, r.old_plan ? r.old_plan + " → " + r.new_plan : r.new_plan),
        r.cause === "initial" ? "" : ", predicted gain " + gain + " (modelled); " + after,
        r.detail ? el("div", {class: "muted"}, r.detail) : null);
    });
    v.replans.replaceChildren(...items);
  }

  // Throughput against energy per inference for every plan on the front; the current one marked.
  function renderPareto(v, m, pareto) {
    const plans = ((pareto && pareto.plans) || [])
      .filter((p) => p.throughput_per_s !== null && p.energy_j_per_inference !== null)
      .sort((a, b) => a.throughput_per_s - b.throughput_per_s);
    const data = [plans.map((p) => p.throughput_per_s), plans.map((p) => p.energy_j_per_inference),
                  plans.map((p) => (p.current ? p.energy_j_per_inference : null))];
    if (!v.charts.pareto) {
      const opts = {
        width: chartWidth(v.pareto), height: 220,
        scales: {x: {time: false}},
        axes: [{label: "throughput, requests/s (modelled)"}, {label: "J/inference (modelled)"}],
        series: [{label: "throughput"},
                 // Points only: the fronts of several pipeline shapes together, not one curve.
                 {label: "front", stroke: "#6b7385", width: 0, paths: () => null,
                  points: {show: true, size: 8, fill: "#6b7385"}},
                 {label: "current plan", stroke: "#c0392b", width: 0, paths: () => null,
                  points: {show: true, size: 14, fill: "#c0392b"}}],
        hooks: {draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.font = (10 * devicePixelRatio) + "px monospace";
          ctx.fillStyle = "#1d2330";
          (u._labels || []).forEach((label, i) => {
            const x = u.valToPos(u.data[0][i], "x", true), y = u.valToPos(u.data[1][i], "y", true);
            ctx.fillText(label, x + 5 * devicePixelRatio, y - 5 * devicePixelRatio);
          });
          ctx.restore();
        }]},
      };
      v.charts.pareto = new uPlot(opts, data, v.pareto);
    }
    v.charts.pareto._labels = plans.map((p) => p.mnemonic);
    v.charts.pareto.setData(data);
    if (!pareto) {
      v.paretoNote.textContent = "read between admin calls: not read yet";
    } else {
      const c = pareto.characteristics;
      const what = [["nodes", c.nodes], ["nnz", c.nnz], ["features", c.feature_len], ["seq", c.seq_len],
                    ["window", c.window]].filter((x) => x[1]).map((x) => x[0] + " " + num(x[1], 0)).join(", ");
      v.paretoNote.textContent = plans.length + " plans on the front for " + what +
        (pareto.current_on_front ? "; current plan " + pareto.current + " marked in red"
                                 : "; current plan " + pareto.current + " is not on this front");
    }
  }

  function renderDrift(v, m) {
    const d = m.drift;
    const rows = [el("tr", {}, el("th", {}, "watched"), el("th", {class: "num"}, "planned for"),
                        el("th", {class: "num"}, "recent mean"), el("th", {class: "num"}, "change"),
                        el("th", {class: "num"}, "threshold"))];
    for (const f of d.characteristics) {
      if (f.baseline === 0 && f.recent === 0) continue;  // not a characteristic of this model's inputs
      const over = Math.abs(f.change) > d.threshold;
      rows.push(el("tr", {"data-watch": f.name},
        el("td", {}, f.name), el("td", {class: "num"}, num(f.baseline, 0)), el("td", {class: "num"}, num(f.recent, 0)),
        el("td", {class: "num" + (over ? " over" : "")}, percent(f.change)),
        el("td", {class: "num"}, "±" + (d.threshold * 100).toFixed(0) + "%")));
    }
    for (const s of d.stage_times) {
      const over = s.planned_ratio > 0 && Math.abs(s.change) > d.stage_time_threshold;
      rows.push(el("tr", {"data-watch": "stage" + s.stage + ".time"},
        el("td", {}, "stage " + (s.stage + 1) + " time, measured/predicted"),
        el("td", {class: "num"}, s.planned_ratio > 0 ? num(s.planned_ratio, 3) : "(first window)"),
        el("td", {class: "num"}, num(s.recent_ratio, 3)),
        el("td", {class: "num" + (over ? " over" : "")}, s.planned_ratio > 0 ? percent(s.change) : ""),
        el("td", {class: "num"}, "±" + (d.stage_time_threshold * 100).toFixed(0) + "%")));
    }
    v.drift.replaceChildren(...rows);
    v.driftNote.textContent = (d.enabled ? "" : "drift detection is off. ") +
      "A re-plan is asked for after " + d.sustain + " requests in a row beyond the threshold (now " + d.streak +
      (d.streak_field ? ", on " + d.streak_field : "") + "), at most once every " + d.min_requests_between +
      " requests; the new plan is taken when its predicted gain exceeds " + (d.min_gain * 100).toFixed(0) +
      "%. Recent mean over the last " + d.window_requests + " requests.";
  }

  // --- The poll ----------------------------------------------------------------------------------

  function render(status) {
    document.getElementById("mode").textContent = "mode " + status.mode;
    renderDevices(status);
    const seen = new Set();
    // The busiest models first: the ones being served are what an operator came to see.
    const models = status.models.slice().sort((a, b) => b.requests.completed - a.requests.completed);
    const order = models.map((m) => m.model).join("\n");
    const reorder = order !== document.getElementById("models").getAttribute("data-order");
    for (const m of models) {
      seen.add(m.model);
      const v = modelView(m.model);
      renderHead(v, m);
      renderPipeline(v, m, status.devices || []);
      renderThroughput(v, m);
      renderPareto(v, m, status.pareto && status.pareto[m.model]);
      renderDrift(v, m);
      if (reorder) document.getElementById("models").append(v.section);
    }
    document.getElementById("models").setAttribute("data-order", order);
    for (const [name, v] of views) {
      if (seen.has(name)) continue;  // an unloaded model leaves the page
      for (const c of Object.values(v.charts)) c.destroy();
      v.section.remove();
      views.delete(name);
    }
    polls += 1;
    document.body.setAttribute("data-polls", String(polls));
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
  }

  function connection(text) {
    document.getElementById("connection").textContent = text;
  }

  async function poll() {
    let res = null, body = null;
    try {
      res = await fetch("/v2/dype/status", {cache: "no-store", headers: token ? {Authorization: "Bearer " + token} : {}});
      body = await res.json();
    } catch (e) {
      // A daemon that stopped or restarts is not an error of the page: said, and polled again.
      connection("daemon unreachable: " + e.message);
    }
    if (body && !res.ok) connection("the daemon answered " + res.status + ": " + (body.error || ""));
    if (body && res.ok) {
      connection("");
      try {
        render(body);
      } catch (e) {
        window.dypeKeepError("render: " + (e && e.stack ? e.stack : e));
      }
    }
    setTimeout(poll, POLL_MS);
  }

  poll();
})();
