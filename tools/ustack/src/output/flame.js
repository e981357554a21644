// SPDX-License-Identifier: GPL-2.0
// ustack's flame graph: click a frame to zoom to it, "Reset zoom" (or Escape) to go back,
// "Search" (or Ctrl-F) for a regular expression: matching frames are marked and the share
// of samples under them is shown. #s=REGEX in the URL searches on load.
"use strict";
var svg, frames, total, W, rowH, pad, zoomed = null, searchRe = null;

function attr(e, n) { return parseFloat(e.getAttribute(n)); }
function frameName(g) { return g.firstElementChild.textContent.split("\n")[0]; }
// A frame's label: its name without the _[i] (inlined) and _[k] (kernel) marks, as
// flamegraph.pl draws it; a " (file:line)" after them stays.
function shown(name) { return name.replace(/(?:_\[[ki]\])+( \([^()]*\))?$/, "$1"); }

function init() {
  svg = document.documentElement;
  if (svg.tagName.toLowerCase() !== "svg") svg = document.querySelector("svg");
  total = attr(svg, "data-total");
  rowH = attr(svg, "data-row");
  pad = attr(svg, "data-pad");
  frames = Array.prototype.slice.call(svg.querySelectorAll("g.f"));
  frames.forEach(function (g) {
    var name = frameName(g);
    g.us = { s: attr(g, "data-s"), n: attr(g, "data-n"), d: attr(g, "data-d"), name: name,
             label: shown(name) };
    g.addEventListener("click", function (ev) { zoom(g); ev.stopPropagation(); });
    g.addEventListener("mouseover", function () { details(g); });
    g.addEventListener("mouseout", function () { details(null); });
  });
  svg.getElementById("reset").addEventListener("click", unzoom);
  svg.getElementById("search").addEventListener("click", askSearch);
  svg.getElementById("unsearch").addEventListener("click", clearSearch);
  window.addEventListener("keydown", function (ev) {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "f") { ev.preventDefault(); askSearch(); }
    if (ev.key === "Escape") {
      if (searchRe || svg.getElementById("matched").getAttribute("class") === "error") clearSearch();
      else unzoom();
    }
  });
  window.addEventListener("resize", layout);
  layout();
  var m = /[#&]s=([^&]*)/.exec(location.hash);
  if (m) search(decodeURIComponent(m[1]));
}

function details(g) {
  var t = svg.getElementById("details");
  t.textContent = g ? g.firstElementChild.textContent.replace("\n", ": ") : " ";
}

// Frames as wide as their samples within the zoomed frame; its ancestors full width.
function layout() {
  var vw = Math.max(400, (window.innerWidth || 1200) - 4);
  svg.setAttribute("width", vw);
  svg.removeAttribute("viewBox");
  W = vw - 2 * pad;
  var zs = zoomed ? zoomed.us.s : 0, zn = zoomed ? zoomed.us.n : total, zd = zoomed ? zoomed.us.d : 0;
  var scale = W / Math.max(zn, 1);
  frames.forEach(function (g) {
    var f = g.us, r = g.children[1], t = g.children[2], x, w;
    var inside = f.s >= zs && f.s + f.n <= zs + zn;
    var ancestor = f.d < zd && f.s <= zs && f.s + f.n >= zs + zn;
    if (f.d >= zd && inside) {
      x = pad + (f.s - zs) * scale; w = f.n * scale;
      g.setAttribute("opacity", "1");
    } else if (ancestor) {
      x = pad; w = W;
      g.setAttribute("opacity", "0.5");
    } else {
      g.setAttribute("display", "none");
      return;
    }
    if (w < 0.1) { g.setAttribute("display", "none"); return; }
    g.removeAttribute("display");
    r.setAttribute("x", x.toFixed(1));
    r.setAttribute("width", w.toFixed(1));
    if (t) {
      t.setAttribute("x", (x + 3).toFixed(1));
      var chars = Math.floor((w - 4) / 7);
      var s = f.label;
      if (chars < 3) s = "";
      else if (s.length > chars) s = s.substring(0, chars - 2) + "..";
      t.textContent = s;
    }
  });
  svg.getElementById("reset").setAttribute("display", zoomed ? "inline" : "none");
  svg.getElementById("search").setAttribute("x", (vw - pad).toFixed(0));
  svg.getElementById("unsearch").setAttribute("x", (vw - pad - 60).toFixed(0));
  svg.getElementById("matched").setAttribute("x", (vw - pad).toFixed(0));
  fitTitle(vw);
  if (searchRe) mark();
}

// The title, centred, cut with ".." to the room between Reset zoom on the left and
// Search and Clear on the right (data-side pixels each side): it never runs under them.
function fitTitle(vw) {
  var t = svg.getElementById("title"), full = t.getAttribute("data-full");
  var room = vw - 2 * (pad + attr(t, "data-side"));
  t.setAttribute("x", (vw / 2).toFixed(0));
  t.textContent = full;
  if (t.getComputedTextLength() <= room) return;
  var lo = 0, hi = full.length;
  while (lo < hi) {
    var mid = Math.ceil((lo + hi) / 2);
    t.textContent = full.substring(0, mid) + "..";
    if (t.getComputedTextLength() <= room) lo = mid; else hi = mid - 1;
  }
  t.textContent = lo > 0 ? full.substring(0, lo) + ".." : "";
}

function zoom(g) { zoomed = g.us.n >= total ? null : g; layout(); }
function unzoom() { zoomed = null; layout(); }

function askSearch() {
  var term = window.prompt("Search for (a regular expression)", searchRe ? searchRe.source : "");
  if (term) search(term);
}

// Mark the frames whose name matches; the matched share counts each sample once, however
// many matching frames its stack holds.
// A term that is not a regular expression is said so in the footer, in red.
function search(term) {
  var m = svg.getElementById("matched"), re;
  try { re = new RegExp(term); } catch (e) {
    if (searchRe) clearSearch();
    m.textContent = "Search: " + e.message;
    m.setAttribute("class", "error");
    svg.getElementById("unsearch").setAttribute("display", "inline");
    return;
  }
  searchRe = re;
  m.removeAttribute("class");
  mark();
}

function mark() {
  var spans = [];
  frames.forEach(function (g) {
    var r = g.children[1];
    if (!r.hasAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
    if (searchRe.test(g.us.name)) {
      r.setAttribute("fill", "rgb(230,0,230)");
      g.setAttribute("class", "f match");
      spans.push([g.us.s, g.us.s + g.us.n]);
    } else {
      r.setAttribute("fill", r.getAttribute("data-fill"));
      g.setAttribute("class", "f");
    }
  });
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var sum = 0, end = -1;
  spans.forEach(function (sp) {
    if (sp[0] >= end) { sum += sp[1] - sp[0]; end = sp[1]; }
    else if (sp[1] > end) { sum += sp[1] - end; end = sp[1]; }
  });
  var m = svg.getElementById("matched");
  m.textContent = "Matched: " + (100 * sum / Math.max(total, 1)).toFixed(2) + "% (" + sum + " of " + total + " samples)";
  m.setAttribute("data-samples", String(sum));
  svg.getElementById("unsearch").setAttribute("display", "inline");
}

function clearSearch() {
  searchRe = null;
  frames.forEach(function (g) {
    var r = g.children[1];
    if (r.hasAttribute("data-fill")) r.setAttribute("fill", r.getAttribute("data-fill"));
    g.setAttribute("class", "f");
  });
  svg.getElementById("matched").textContent = " ";
  svg.getElementById("matched").removeAttribute("class");
  svg.getElementById("unsearch").setAttribute("display", "none");
}

window.addEventListener("load", init);
