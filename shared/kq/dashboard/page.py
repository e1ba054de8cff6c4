"""The dashboard's one page: static HTML, CSS and a small script that polls /api/state and draws it.

Every name on the page comes from users' objects, so the script builds the DOM with textContent
(never innerHTML). data-testid attributes are what the browser test reads.
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kq dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { --bg:#f4f6fa; --card:#fff; --ink:#1d2433; --muted:#6b7385; --line:#e3e7ef;
          --used:#2f6fed; --reserved:#9bb8f7; --over:#e5484d; --ok:#2e9d5b; --warn:#d98b00; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background:var(--bg);
         color:var(--ink); }
  header { display:flex; align-items:baseline; gap:16px; padding:14px 24px; background:#1d2433; color:#fff; }
  header h1 { font-size:18px; margin:0; letter-spacing:.3px; }
  header .meta { color:#aab3c5; font-size:12px; }
  main { display:grid; grid-template-columns: 240px 1fr 340px; gap:18px; padding:18px 24px; align-items:start; }
  section > h2 { font-size:12px; text-transform:uppercase; letter-spacing:.8px; color:var(--muted); margin:0 0 8px; }
  .card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 16px;
          margin-bottom:14px; box-shadow:0 1px 2px rgba(20,30,60,.04); }
  .cq-head { display:flex; align-items:center; gap:8px; margin-bottom:10px; }
  .cq-head h3 { margin:0; font-size:16px; }
  .pill { font-size:11px; padding:1px 8px; border-radius:999px; background:#eef1f6; color:var(--muted); }
  .pill.active { background:#e4f5eb; color:var(--ok); } .pill.inactive { background:#fdecec; color:var(--over); }
  .counts { margin-left:auto; display:flex; gap:12px; font-size:12px; color:var(--muted); }
  .counts b { color:var(--ink); font-size:15px; }
  .bar-row { display:grid; grid-template-columns: 150px 1fr 150px; gap:10px; align-items:center; margin:6px 0; }
  .bar-label { font-size:12px; color:var(--muted); white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
  .bar { position:relative; height:14px; background:#edf0f5; border-radius:7px; overflow:hidden; }
  .bar .reserved, .bar .used { position:absolute; left:0; top:0; bottom:0; border-radius:7px; }
  .bar .reserved { background:var(--reserved); } .bar .used { background:var(--used); }
  .bar.over .used { background:var(--over); }
  .bar-value { font-size:12px; text-align:right; font-variant-numeric: tabular-nums; }
  table { width:100%; border-collapse:collapse; font-size:12px; margin-top:8px; }
  th { text-align:left; color:var(--muted); font-weight:500; border-bottom:1px solid var(--line); padding:4px 6px; }
  td { border-bottom:1px solid var(--line); padding:4px 6px; vertical-align:top; }
  td.pos { font-weight:600; text-align:center; width:48px; }
  td.why { color:#8a5a00; }
  .tree div { padding:3px 0; } .tree .cq { color:var(--used); font-size:12px; }
  .decision { display:flex; gap:8px; align-items:baseline; padding:6px 0; border-bottom:1px solid var(--line); }
  .kind { font-size:11px; font-weight:600; padding:1px 7px; border-radius:4px; min-width:72px; text-align:center; }
  .kind.Admitted { background:#e4f5eb; color:var(--ok); } .kind.Preempted { background:#fdecec; color:var(--over); }
  .kind.Evicted { background:#fff3dc; color:var(--warn); }
  .decision .what { font-size:12px; } .decision .when { color:var(--muted); font-size:11px; }
  .empty { color:var(--muted); font-size:12px; font-style:italic; }
  .legend { display:flex; gap:12px; font-size:11px; color:var(--muted); margin-bottom:8px; }
  .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
</style>
</head>
<body>
<header><h1>kq</h1><span class="meta" id="cluster">connecting…</span><span class="meta" id="updated"></span></header>
<main>
  <section><h2>Cohorts</h2><div class="card tree" data-testid="cohorts"></div></section>
  <section><h2>ClusterQueues</h2>
    <div class="legend"><span><i style="background:var(--used)"></i>in use</span>
      <span><i style="background:var(--reserved)"></i>reserved</span>
      <span><i style="background:var(--over)"></i>borrowing (over nominal)</span></div>
    <div data-testid="cluster-queues"></div></section>
  <section><h2>Recent admissions and preemptions</h2><div class="card" data-testid="recent"></div></section>
</main>
<script>
"use strict";
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "style") e.style.cssText = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function bar(b) {
  const over = b.used_pct > 100 || b.reserved_pct > 100;
  return el("div", {class: "bar-row", "data-testid": "bar", "data-flavor": b.flavor, "data-resource": b.resource,
                    "data-used-pct": b.used_pct},
    el("span", {class: "bar-label", title: b.flavor + " / " + b.resource}, b.flavor + " · " + b.resource),
    el("div", {class: "bar" + (over ? " over" : "")},
      el("div", {class: "reserved", style: "width:" + Math.min(b.reserved_pct, 100) + "%"}),
      el("div", {class: "used", style: "width:" + Math.min(b.used_pct, 100) + "%"})),
    el("span", {class: "bar-value"}, b.used + " / " + b.nominal + "  (" + Math.round(b.used_pct) + "%)"));
}
function pendingTable(cq) {
  if (!cq.positions_known) return el("div", {class: "empty"}, "positions unknown: no admission leader answers");
  if (!cq.pending_workloads.length) return el("div", {class: "empty"}, "nothing pending");
  const t = el("table", {"data-testid": "pending"},
    el("thead", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "in LQ"), el("th", {}, "workload"),
                    el("th", {}, "queue"), el("th", {}, "prio"), el("th", {}, "why pending"))));
  const body = el("tbody");
  for (const w of cq.pending_workloads) {
    body.append(el("tr", {"data-testid": "pending-row", "data-name": w.name},
      el("td", {class: "pos"}, w.position_in_cluster_queue), el("td", {class: "pos"}, w.position_in_local_queue),
      el("td", {}, w.namespace + "/" + w.name), el("td", {}, w.local_queue), el("td", {}, w.priority),
      el("td", {class: "why"}, w.message || w.reason || "waiting for a scheduling round")));
  }
  t.append(body);
  return t;
}
function card(cq) {
  const head = el("div", {class: "cq-head"}, el("h3", {}, cq.name),
    el("span", {class: "pill"}, cq.cohort ? "cohort " + cq.cohort : "no cohort"),
    el("span", {class: "pill " + (cq.active ? "active" : "inactive"), title: cq.inactive_reason},
       cq.active ? "active" : "inactive"),
    el("span", {class: "counts"}, el("span", {}, el("b", {}, cq.pending), " pending"),
       el("span", {}, el("b", {}, cq.reserving), " reserving"), el("span", {}, el("b", {}, cq.admitted), " admitted")));
  const c = el("div", {class: "card", "data-testid": "cluster-queue", "data-name": cq.name}, head);
  for (const b of cq.bars) c.append(bar(b));
  if (cq.local_queues.length) {
    c.append(el("div", {class: "bar-label", style: "margin-top:8px"}, "LocalQueues: " +
      cq.local_queues.map(q => q.namespace + "/" + q.name + " (" + q.pending + " pending, " + q.admitted +
                                " admitted)").join(", ")));
  }
  c.append(pendingTable(cq));
  return c;
}
function tree(state) {
  const box = document.querySelector("[data-testid=cohorts]");
  box.replaceChildren();
  const loose = state.cluster_queues.filter(q => !q.cohort).map(q => q.name);
  for (const n of state.cohorts) {
    box.append(el("div", {style: "padding-left:" + (n.depth * 14) + "px", "data-testid": "cohort"}, "▸ " + n.name));
    for (const q of n.cluster_queues) {
      box.append(el("div", {class: "cq", style: "padding-left:" + (n.depth * 14 + 14) + "px"}, q));
    }
  }
  for (const q of loose) box.append(el("div", {class: "cq"}, q + " (no cohort)"));
  if (!box.childElementCount) box.append(el("div", {class: "empty"}, "no ClusterQueues yet"));
}
function recent(state) {
  const box = document.querySelector("[data-testid=recent]");
  box.replaceChildren();
  for (const d of state.recent) {
    box.append(el("div", {class: "decision", "data-testid": "decision", "data-kind": d.kind, "data-name": d.name},
      el("span", {class: "kind " + d.kind}, d.kind),
      el("span", {}, el("div", {class: "what"}, d.namespace + "/" + d.name + " · " + d.detail),
         el("div", {class: "when", title: d.message}, d.at))));
  }
  if (!state.recent.length) box.append(el("div", {class: "empty"}, "no decisions yet"));
}
async function refresh() {
  try {
    const r = await fetch("api/state", {cache: "no-store"});
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    const state = await r.json();
    document.getElementById("cluster").textContent = "cluster " + state.cluster;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.querySelector("[data-testid=cluster-queues]").replaceChildren(...state.cluster_queues.map(card));
    tree(state);
    recent(state);
    document.body.dataset.loaded = "true";
  } catch (e) {
    document.getElementById("updated").textContent = "cannot read state: " + e.message;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""
