/* strata's HTML report: an icicle (flame) graph with zoom, search and hover
 * details, a sortable table of functions, thread and rank selectors, and for
 * several MPI ranks the load balance of a chosen function across them. The data
 * is the JSON in <script id="strata-data">; every label reaches the page through
 * textContent or the canvas, never as markup. No network, no server. */
(function () {
  "use strict";
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });

  var D = JSON.parse(document.getElementById("strata-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var unit = D.unit;
  var ROW = 18;
  var view = -1;  /* -1: the primary unit (time, else calls); else D.views[view] */

  function fmt(v) {
    if (unit === "bytes") {
      var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
      while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return (i ? v.toFixed(2) : Math.round(v)) + " " + u[i];
    }
    if (unit !== "ns") return Math.round(v).toLocaleString("en-US") + " " + unit;
    var s = v / 1e9;
    if (s >= 1) return s.toFixed(3) + " s";
    if (s >= 1e-3) return (s * 1e3).toFixed(3) + " ms";
    if (s >= 1e-6) return (s * 1e6).toFixed(3) + " \u00b5s";
    return Math.round(v) + " ns";
  }
  function pct(v, total) { return total > 0 ? (100 * v / total).toFixed(2) + "%" : "-"; }

  /* A tree: arrays by node index; node 0 is a synthetic root. */
  function newTree() {
    return { parent: [-1], label: [-1], count: [0], incl: [0], self: [0], mean: [0], m2: [0],
             kids: [[]], index: [new Map()] };
  }
  function addNode(t, parent, label) {
    var m = t.index[parent], k = m.get(label);
    if (k !== undefined) return k;
    k = t.parent.length;
    t.parent.push(parent); t.label.push(label); t.count.push(0); t.incl.push(0);
    t.self.push(0); t.mean.push(0); t.m2.push(0); t.kids.push([]); t.index.push(new Map());
    t.kids[parent].push(k);
    m.set(label, k);
    return k;
  }
  /* Chan's combination of (n, mean, m2) states. */
  function combine(t, k, n, mean, m2) {
    var na = t.count[k], nb = n, N = na + nb;
    if (nb === 0) return;
    var d = mean - t.mean[k];
    t.mean[k] = N ? t.mean[k] + d * nb / N : 0;
    t.m2[k] = t.m2[k] + m2 + (N ? d * d * na * nb / N : 0);
    t.count[k] = N;
  }
  /* Builds the tree of the selected threads (all threads merged by call path). */
  function buildTree(threads) {
    var t = newTree();
    threads.forEach(function (th) {
      var a = th.nodes, n = a.length / 7, map = new Int32Array(n);
      /* weighed by another metric: its [total, self] of each node */
      var w = view >= 0 ? D.views[view].threads[D.threads.indexOf(th)] : null;
      for (var i = 0; i < n; i++) {
        var p = a[7 * i], par = p < 0 ? 0 : map[p];
        var k = addNode(t, par, a[7 * i + 1]);
        map[i] = k;
        var cnt = a[7 * i + 2], mean = a[7 * i + 5], sd = a[7 * i + 6];
        t.incl[k] += w ? w[2 * i] : a[7 * i + 3];
        t.self[k] += w ? w[2 * i + 1] : a[7 * i + 4];
        if (w) t.count[k] += cnt; else combine(t, k, cnt, mean, sd * sd * cnt);
      }
    });
    for (var r = 0, tot = 0; r < t.kids[0].length; r++) tot += t.incl[t.kids[0][r]];
    t.incl[0] = tot;
    t.index = null;
    return t;
  }

  var threadSel = $("thread"), rankSel = $("rank");
  var ranks = [];
  /* a followed process tree's result: its ranks are its processes, by pid */
  var UNIT = D.processes ? "process" : "rank", UNITS = D.processes ? "processes" : "ranks";
  $("rankbox").firstChild.textContent = UNIT + " ";
  $("lbtitle").textContent = "Load balance across " + UNITS;
  $("lbunit").textContent = UNIT;
  D.threads.forEach(function (th) { if (th.rank !== null && ranks.indexOf(th.rank) < 0) ranks.push(th.rank); });
  ranks.sort(function (a, b) { return a - b; });
  function option(sel, value, text) {
    var o = document.createElement("option");
    o.value = value; o.textContent = text; sel.appendChild(o);
  }
  if (ranks.length) {
    option(rankSel, "all", "all " + UNITS + " (" + ranks.length + ")");
    ranks.forEach(function (r) { option(rankSel, String(r), UNIT + " " + r); });
  } else {
    $("rankbox").style.display = "none";
  }
  function fillThreads() {
    var keep = threadSel.value;
    while (threadSel.firstChild) threadSel.removeChild(threadSel.firstChild);
    var seen = {};
    option(threadSel, "all", "all threads");
    D.threads.forEach(function (th) {
      var key = String(th.index);
      if (seen[key]) return;
      seen[key] = 1;
      option(threadSel, key, "|" + th.index + ">>> " + (th.name || "thread " + th.index));
    });
    threadSel.value = seen[keep] ? keep : "all";
  }
  fillThreads();

  function selected() {
    var r = rankSel.value, ti = threadSel.value;
    return D.threads.filter(function (th) {
      return (r === "all" || !ranks.length || String(th.rank) === r) &&
             (ti === "all" || String(th.index) === ti);
    });
  }

  var tree = null, zoom = 0, search = "", hover = -1;
  var canvas = $("graph"), ctx = canvas.getContext("2d"), tip = $("tip");
  var boxes = [];  /* drawn frames: [x, y, w, node] */

  function depthOf(k) { var d = 0; while (k > 0) { k = tree.parent[k]; d++; } return d; }
  function isAncestor(a, k) { while (k > 0) { if (k === a) return true; k = tree.parent[k]; } return a === 0; }
  function colour(k) {
    var name = D.labels[tree.label[k]] || "";
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
    var hue = 10 + Math.abs(h) % 45, light = 55 + Math.abs(h >> 8) % 15;
    return "hsl(" + hue + ",85%," + light + "%)";
  }
  function matches(k) {
    return search && (D.labels[tree.label[k]] || "").toLowerCase().indexOf(search) >= 0;
  }

  function draw() {
    var width = canvas.clientWidth || 1000;
    /* rows: zoomed node's ancestors above it, then its subtree */
    var maxDepth = 0, stack = [[zoom, 0]];
    while (stack.length) {
      var e = stack.pop();
      if (e[1] > maxDepth) maxDepth = e[1];
      if (e[1] < 200) tree.kids[e[0]].forEach(function (c) { stack.push([c, e[1] + 1]); });
    }
    var up = zoom ? depthOf(zoom) : 0;
    var rows = up + maxDepth + 1;
    var dpr = window.devicePixelRatio || 1;
    canvas.style.height = rows * ROW + "px";
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(rows * ROW * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, rows * ROW);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    boxes = [];
    var total = tree.incl[zoom] || 1;
    function frame(k, x, y, w, dim) {
      var name = k === 0 ? rootName + " (" + fmt(tree.incl[0]) + ")" : D.labels[tree.label[k]];
      ctx.fillStyle = dim ? "#ddd" : matches(k) ? "#e040fb" : k === 0 ? "#90a4ae" : colour(k);
      ctx.fillRect(x, y, Math.max(w - 1, 0.5), ROW - 1);
      if (k === hover) { ctx.strokeStyle = "#000"; ctx.strokeRect(x + 0.5, y + 0.5, w - 2, ROW - 2); }
      if (w > 30) {
        ctx.fillStyle = "#000";
        ctx.save();
        ctx.beginPath(); ctx.rect(x, y, w - 3, ROW); ctx.clip();
        ctx.fillText(name, x + 3, y + ROW / 2);
        ctx.restore();
      }
      boxes.push([x, y, w, k]);
    }
    /* ancestors of the zoomed node: full width, greyed */
    var anc = [], a = zoom;
    while (a > 0) { a = tree.parent[a]; anc.unshift(a); }
    anc.forEach(function (k, i) { frame(k, 0, i * ROW, width, true); });
    var st = [[zoom, 0, up]];
    while (st.length) {
      var f = st.pop(), k = f[0], x = f[1], d = f[2];
      var w = tree.incl[k] / total * width;
      if (w < 0.5 && k !== zoom) continue;
      frame(k, x, d * ROW, k === zoom ? width : w, false);
      var cx = x;
      tree.kids[k].forEach(function (c) {
        st.push([c, cx, d + 1]);
        cx += tree.incl[c] / total * width;
      });
    }
    /* breadcrumbs */
    var crumbs = $("crumbs");
    while (crumbs.firstChild) crumbs.removeChild(crumbs.firstChild);
    if (zoom) {
      var b = document.createElement("button");
      b.textContent = "reset zoom";
      b.onclick = function () { zoom = 0; draw(); };
      crumbs.appendChild(b);
      crumbs.appendChild(document.createTextNode("zoomed on " + D.labels[tree.label[zoom]]));
    } else {
      crumbs.appendChild(document.createTextNode("click a frame to zoom in, the top bar to zoom out"));
    }
    if (search) {
      var m = 0, s2 = [0];
      while (s2.length) {
        var k2 = s2.pop();
        if (k2 && matches(k2)) { m += tree.incl[k2]; continue; }
        tree.kids[k2].forEach(function (c) { s2.push(c); });
      }
      $("matches").textContent = "matched " + pct(m, tree.incl[0]);
    } else {
      $("matches").textContent = "";
    }
  }

  function at(ev) {
    var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    for (var i = boxes.length - 1; i >= 0; i--) {
      var b = boxes[i];
      if (x >= b[0] && x < b[0] + b[2] && y >= b[1] && y < b[1] + ROW) return b[3];
    }
    return -1;
  }
  canvas.addEventListener("click", function (ev) {
    var k = at(ev);
    if (k < 0) return;
    zoom = (k === zoom && k !== 0) ? tree.parent[k] : (isAncestor(k, zoom) && k !== zoom ? k : k);
    if (zoom < 0) zoom = 0;
    draw();
  });
  canvas.addEventListener("mousemove", function (ev) {
    var k = at(ev);
    if (k !== hover) { hover = k; draw(); }
    if (k < 0) { tip.style.display = "none"; return; }
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    var title = document.createElement("b");
    title.textContent = k === 0 ? "all" : D.labels[tree.label[k]];
    tip.appendChild(title);
    var t = document.createElement("table");
    var rows = [["total", fmt(tree.incl[k]) + " (" + pct(tree.incl[k], tree.incl[0]) + ")"]];
    if (k) {
      rows.push(["self", fmt(tree.self[k]) + " (" + pct(tree.self[k], tree.incl[0]) + ")"]);
      rows.push(["calls", tree.count[k].toLocaleString("en-US")]);
      if (unit === "ns") {
        rows.push(["mean", fmt(tree.mean[k])]);
        rows.push(["stddev", fmt(tree.count[k] ? Math.sqrt(tree.m2[k] / tree.count[k]) : 0)]);
      }
    }
    rows.forEach(function (r) {
      var tr = document.createElement("tr"), a = document.createElement("td"), b = document.createElement("td");
      a.textContent = r[0]; b.textContent = r[1]; tr.appendChild(a); tr.appendChild(b); t.appendChild(tr);
    });
    tip.appendChild(t);
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 360) + "px";
    tip.style.top = ev.clientY + 14 + "px";
  });
  canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; hover = -1; draw(); });

  /* the table: one row per label, recursion counted once in total */
  var sortKey = "self", sortAsc = false, rowsData = [];
  /* One row per label of tree t: self, total (recursion counted once), calls,
   * mean and stddev of a call. */
  function tableRows(t) {
    var by = new Map(), active = new Map();
    function get(l) {
      var r = by.get(l);
      if (!r) { r = { label: l, name: D.labels[l], self: 0, total: 0, count: 0, mean: 0, m2: 0 }; by.set(l, r); }
      return r;
    }
    var st = t.kids[0].slice().reverse().map(function (k) { return [k, 0]; });
    while (st.length) {
      var e = st.pop(), k = e[0];
      var l = t.label[k];
      if (e[1] === 1) { active.set(l, active.get(l) - 1); continue; }
      var r = get(l), n = t.count[k];
      r.self += t.self[k];
      if (!active.get(l)) r.total += t.incl[k];
      if (n) {
        var N = r.count + n, d = t.mean[k] - r.mean;
        r.mean += d * n / N;
        r.m2 += t.m2[k] + d * d * r.count * n / N;
        r.count = N;
      }
      active.set(l, (active.get(l) || 0) + 1);
      st.push([k, 1]);
      for (var i = t.kids[k].length - 1; i >= 0; i--) st.push([t.kids[k][i], 0]);
    }
    var rows = Array.from(by.values());
    rows.forEach(function (r) { r.stddev = r.count ? Math.sqrt(r.m2 / r.count) : 0; });
    return rows;
  }
  function buildTable() {
    rowsData = tableRows(tree);
    renderTable();
  }
  var COLS = [["name", "function"], ["self", "self"], ["total", "total"], ["count", "count"],
              ["mean", "mean"], ["stddev", "stddev"]];
  function renderTable() {
    var head = $("thead"), body = $("tbody");
    while (head.firstChild) head.removeChild(head.firstChild);
    while (body.firstChild) body.removeChild(body.firstChild);
    var tr = document.createElement("tr");
    COLS.forEach(function (c) {
      if (unit !== "ns" && (c[0] === "mean" || c[0] === "stddev")) return;
      var th = document.createElement("th");
      th.textContent = c[1];
      th.dataset.key = c[0];
      if (c[0] === "name") th.className = "name";
      if (c[0] === sortKey) th.className += " sorted" + (sortAsc ? " asc" : "");
      th.onclick = function () {
        if (sortKey === c[0]) sortAsc = !sortAsc; else { sortKey = c[0]; sortAsc = c[0] === "name"; }
        renderTable();
      };
      tr.appendChild(th);
    });
    head.appendChild(tr);
    var k = sortKey, dir = sortAsc ? 1 : -1;
    rowsData.sort(function (a, b) {
      var x = a[k], y = b[k];
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    var total = tree.incl[0];
    rowsData.slice(0, 2000).forEach(function (r) {
      var row = document.createElement("tr");
      COLS.forEach(function (c) {
        if (unit !== "ns" && (c[0] === "mean" || c[0] === "stddev")) return;
        var td = document.createElement("td");
        if (c[0] === "name") { td.className = "name"; td.textContent = r.name; }
        else if (c[0] === "count") td.textContent = r.count.toLocaleString("en-US");
        else if (c[0] === "self" || c[0] === "total") td.textContent = fmt(r[c[0]]) + " (" + pct(r[c[0]], total) + ")";
        else td.textContent = fmt(r[c[0]]);
        row.appendChild(td);
      });
      row.onclick = function () { showBalance(r.label); };
      body.appendChild(row);
    });
    $("tablenote").textContent = rowsData.length > 2000 ? "showing 2,000 of " + rowsData.length.toLocaleString("en-US") + " functions" : "";
  }

  /* Load balance: a function's total in every rank (recursion counted once), drawn
   * as one bar a rank with the mean across ranks; ranks where it never ran are 0
   * and marked. Shown when the result holds two ranks or more. */
  var lbfn = $("lbfn"), lbchart = $("lbchart"), lbLabel = -1, lbBars = 0;
  function rankTotals(label) {
    var tot = new Map(), ran = new Map();
    ranks.forEach(function (r) { tot.set(r, 0); ran.set(r, false); });
    D.threads.forEach(function (th) {
      if (th.rank === null) return;
      var a = th.nodes, n = a.length / 7, inL = new Uint8Array(n), s = 0, hit = false;
      for (var i = 0; i < n; i++) {  /* parents come before their children */
        var p = a[7 * i], up = p >= 0 ? inL[p] : 0;
        if (a[7 * i + 1] === label) {
          if (!up) s += a[7 * i + 3];
          if (a[7 * i + 2] > 0) hit = true;
          inL[i] = 1;
        } else inL[i] = up;
      }
      tot.set(th.rank, tot.get(th.rank) + s);
      if (hit) ran.set(th.rank, true);
    });
    return ranks.map(function (r) { return [tot.get(r), ran.get(r)]; });
  }
  function drawBalance() {
    var dpr = window.devicePixelRatio || 1, w = lbchart.clientWidth, h = lbchart.clientHeight;
    lbchart.width = w * dpr; lbchart.height = h * dpr;
    var g = lbchart.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    if (lbLabel < 0) return;
    var v = rankTotals(lbLabel), max = 0, sum = 0, idle = 0, lo = 0, hi = 0;
    v.forEach(function (x, i) {
      sum += x[0];
      if (x[0] > max) { max = x[0]; hi = i; }
      if (x[0] < v[lo][0]) lo = i;
      if (!x[1]) idle++;
    });
    var mean = sum / v.length, top = 14, bottom = 16, plot = h - top - bottom;
    var bw = (w - 8) / v.length;
    v.forEach(function (x, i) {
      var bh = max > 0 ? plot * x[0] / max : 0, bx = 4 + i * bw;
      g.fillStyle = x[1] ? "#e8783a" : "#c0392b";
      if (x[1]) g.fillRect(bx + (bw > 3 ? 0.5 : 0), top + plot - bh, Math.max(bw - 1, 0.5), bh);
      else g.fillRect(bx, top + plot - 2, Math.max(bw - 1, 0.5), 2);
    });
    g.strokeStyle = "#333"; g.setLineDash([4, 3]);
    var my = top + plot - (max > 0 ? plot * mean / max : 0);
    g.beginPath(); g.moveTo(4, my); g.lineTo(w - 4, my); g.stroke(); g.setLineDash([]);
    g.fillStyle = "#333"; g.font = "11px sans-serif";
    g.fillText(UNIT + " " + ranks[0], 4, h - 3);
    var last = UNIT + " " + ranks[ranks.length - 1];
    g.fillText(last, w - 4 - g.measureText(last).width, h - 3);
    g.fillText("mean " + fmt(mean), 6, top - 3);
    lbBars = v.length;
    $("lbnote").textContent = "max " + fmt(max) + " (" + UNIT + " " + ranks[hi] + "), min " +
      fmt(v[lo][0]) + " (" + UNIT + " " + ranks[lo] + "), mean " + fmt(mean) + ", imbalance " +
      (max > 0 ? (100 * (max - mean) / max).toFixed(1) : "0.0") + "%" +
      (idle ? ", " + idle + " of " + v.length + " " + UNITS + " never ran it" : "");
  }
  function showBalance(label) {
    if (ranks.length < 2) return;
    lbLabel = label;
    var have = Array.prototype.some.call(lbfn.options, function (o) { return o.value === String(label); });
    if (!have) option(lbfn, String(label), D.labels[label]);
    lbfn.value = String(label);
    drawBalance();
  }
  /* the choices: the functions with the most total time; first, of those that ran
   * in two ranks or more (one that a single rank runs, a coordinator's, is no
   * question of balance), the one whose slowest rank is furthest above the mean
   * (the time the imbalance costs) */
  function fillBalance() {
    if (ranks.length < 2) return;
    $("lbbox").style.display = "block";
    var top = tableRows(buildTree(D.threads))
      .sort(function (a, b) { return b.total - a.total; }).slice(0, 30);
    var best = -1, bestImb = -1;
    top.forEach(function (r) {
      option(lbfn, String(r.label), r.name);
      var v = rankTotals(r.label), max = 0, sum = 0, ran = 0;
      v.forEach(function (x) { sum += x[0]; if (x[0] > max) max = x[0]; if (x[1]) ran++; });
      var imb = ran >= 2 ? max - sum / v.length : -1;
      if (imb > bestImb + 1e-9) { bestImb = imb; best = r.label; }
    });
    lbfn.onchange = function () { showBalance(Number(lbfn.value)); };
    if (best < 0 && top.length) best = top[0].label;
    if (best >= 0) showBalance(best);
  }

  /* The one root of the graph: the thread when one is shown, as the other
   * formats name it, else all that are. */
  var rootName = "all";
  function refresh() {
    var sel = selected();
    rootName = sel.length === 1
      ? (sel[0].rank !== null ? UNIT + " " + sel[0].rank + " " : "") + "thread " + sel[0].index +
        (sel[0].name ? " (" + sel[0].name + ")" : "")
      : "all";
    tree = buildTree(sel);
    zoom = 0;
    draw();
    buildTable();
  }
  threadSel.onchange = refresh;
  /* weigh by: the primary unit, or another metric the profile has */
  var weighSel = $("weigh");
  if (D.views && D.views.length) {
    option(weighSel, "-1", D.unit === "ns" ? "time" : D.unit);
    D.views.forEach(function (v, i) { option(weighSel, String(i), v.name); });
    weighSel.onchange = function () {
      view = Number(weighSel.value);
      unit = view >= 0 ? D.views[view].unit : D.unit;
      refresh();
    };
  } else {
    $("weighbox").style.display = "none";
  }
  rankSel.onchange = function () { fillThreads(); refresh(); };

  /* The process tree: one row a process, under its parent; a click on one with
   * results shows its profile alone (the rank selector). */
  var procRows = [];
  function fillProcesses() {
    if (!D.processes) return;
    $("procbox").style.display = "block";
    var depth = new Map(), body = $("procrows");
    D.processes.forEach(function (p) {
      var d = depth.has(p[1]) ? depth.get(p[1]) + 1 : 0;
      if (p[0] && p[2] !== null && !depth.has(p[0])) depth.set(p[0], d);
      var tr = document.createElement("tr"), has = ranks.indexOf(p[0]) >= 0 && p[2] !== null;
      [(d ? "\u00a0\u00a0".repeat(d) + "\u2514 " : "") + (p[0] || "-"), p[1] || "",
       p[3] !== null ? "not followed: " + p[3] : has ? (p[2] ? p[2] + "/" : "the run's folder") : (p[2] || "") + "/ (no results)",
       p[4]].forEach(function (text, i) {
        var td = document.createElement("td");
        td.textContent = text;
        if (i >= 2) td.className = "name";
        tr.appendChild(td);
      });
      if (has) {
        tr.className = "click";
        tr.onclick = function () { rankSel.value = String(p[0]); rankSel.onchange(); };
      }
      body.appendChild(tr);
      procRows.push(tr);
    });
  }
  fillProcesses();
  $("search").addEventListener("input", function (e) { search = e.target.value.toLowerCase(); draw(); });
  window.addEventListener("resize", function () { draw(); drawBalance(); });
  fillBalance();
  refresh();

  /* #selftest: click the widest frame below the root and report what happened
   * (used by the test suite in a headless browser). */
  if (location.hash === "#selftest") {
    var target = -1, best = -1;
    boxes.forEach(function (b) { if (b[3] !== 0 && b[2] > best) { best = b[2]; target = b; } });
    var before = zoom, result = "no frame drawn";
    if (target !== -1) {
      var r = canvas.getBoundingClientRect();
      var x = r.left + target[0] + 2, y = r.top + target[1] + ROW / 2;
      canvas.dispatchEvent(new MouseEvent("click", { clientX: x, clientY: y, bubbles: true }));
      result = zoom !== before && zoom === target[3] ? "zoomed:" + D.labels[tree.label[zoom]] : "click did not zoom";
      zoom = before;
      draw();
    }
    document.body.setAttribute("data-selftest", result);
    document.body.setAttribute("data-errors", errors.join(" | "));
    document.body.setAttribute("data-frames", String(boxes.length));
    document.body.setAttribute("data-rows", String(rowsData.length));
    document.body.setAttribute("data-root", rootName);
    document.body.setAttribute("data-balance", lbLabel >= 0 ? D.labels[lbLabel] + ":" + lbBars : "none");
    /* the process tree: its rows, and what a click on the last one with results shows */
    var clickable = procRows.filter(function (tr) { return tr.onclick; });
    if (clickable.length) {
      clickable[clickable.length - 1].onclick();
      document.body.setAttribute("data-process-click", rootName + ":" + rowsData.length);
      rankSel.value = "all";
      rankSel.onchange();
    }
    document.body.setAttribute("data-processes", String(procRows.length));
    /* weighed by each other metric in turn: its name, the graph's total and the unit
     * shown for it */
    var weighs = [];
    (D.views || []).forEach(function (v, i) {
      weighSel.value = String(i);
      weighSel.onchange();
      weighs.push(v.name + ":" + Math.round(tree.incl[0]) + ":" + fmt(tree.incl[0]));
    });
    if (weighs.length) { weighSel.value = "-1"; weighSel.onchange(); }
    document.body.setAttribute("data-weigh", weighs.join(";"));
  }
})();
