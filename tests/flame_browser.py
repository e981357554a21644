#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ustack's flame graph in a real browser: Debian's chromium, headless, loads a page that
holds the SVG in an iframe and drives it as a user would: a click on a frame (the view
zooms to it), the Search button with a regular expression (the matching frames are marked
and their share of the samples shown), a term that is not a regular expression (said so
in red), Reset zoom; and, in a narrow window, a graph of kernel and user frames whose long
title is cut before the buttons and whose labels drop the _[k] / _[i] marks (the tooltips
keep them). The page writes what it saw into its
own DOM, which chromium prints (--dump-dom); this script checks it against the trace's
ground truth: in tests/fixtures/text.trace, uu_chain holds 20 of the 23 samples and
uu_bench 3.

Usage: tests/flame_browser.py [USTACK]   (default tools/ustack/target/release/ustack)
Exits 0 with a SKIP line when chromium is not installed (apt-get install chromium).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USTACK = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    ROOT, "tools/ustack/target/release/ustack")
TRACE = os.path.join(ROOT, "tools/ustack/tests/fixtures/text.trace")
KSTACK = os.path.join(ROOT, "tools/ustack/tests/fixtures/kstack.dat")

PAGE = """<!DOCTYPE html>
<html><body>
<iframe id="fg" src="flame.svg" width="1000" height="600"></iframe>
<iframe id="narrow" src="narrow.svg" width="480" height="600"></iframe>
<pre id="result">pending</pre>
<script>
function box(g) {
  var r = g.querySelector("rect");
  return { w: parseFloat(r.getAttribute("width")), x: parseFloat(r.getAttribute("x")),
           shown: g.getAttribute("display") !== "none",
           opacity: g.getAttribute("opacity"), fill: r.getAttribute("fill"),
           cls: g.getAttribute("class") };
}
function named(doc, name) {
  return Array.prototype.filter.call(doc.querySelectorAll("g.f"), function (g) {
    return g.querySelector("title").textContent.split("\\n")[0] === name;
  });
}
function click(el) {
  el.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
}
function span(doc, id) {
  var b = doc.getElementById(id).getBBox();
  return { x: b.x, w: b.width };
}
// The frames' labels that keep an _[i] or _[k] mark, and the tooltips that have one.
function marks(doc) {
  var labels = 0, titles = 0;
  Array.prototype.forEach.call(doc.querySelectorAll("g.f"), function (g) {
    if (/_\[[ki]\]/.test(g.querySelector("text").textContent)) labels++;
    if (/_\[[ki]\]/.test(g.querySelector("title").textContent)) titles++;
  });
  return { labels: labels, titles: titles };
}
// The narrow window: a long title, zoomed (Reset zoom shown) and searched (Clear shown).
function narrow(out) {
  var win = document.getElementById("narrow").contentWindow, doc = win.document;
  var n = { before: marks(doc) };
  var frames = doc.querySelectorAll("g.f");
  click(frames[frames.length - 1]);
  win.prompt = function () { return "schedule"; };
  click(doc.getElementById("search"));
  var t = doc.getElementById("title");
  n.title = t.textContent;
  n.full = t.getAttribute("data-full");
  n.spans = { title: span(doc, "title"), reset: span(doc, "reset"),
              search: span(doc, "search"), unsearch: span(doc, "unsearch") };
  n.shown = { reset: doc.getElementById("reset").getAttribute("display"),
              unsearch: doc.getElementById("unsearch").getAttribute("display") };
  n.zoomed = marks(doc);
  out.narrow = n;
}
var loaded = 0;
function onload() {
  if (++loaded < 2) return;
  setTimeout(function () {
    var out = {};
    try {
      narrow(out);
      var win = document.getElementById("fg").contentWindow, doc = win.document;
      var svg = doc.documentElement;
      out.svg_width = parseFloat(svg.getAttribute("width"));
      var all = named(doc, "all")[0], bench = named(doc, "uu_bench+0x118e")[0];
      var chain = named(doc, "uu_chain+0x110e")[0];
      out.before = { all: box(all), bench: box(bench), chain: box(chain) };
      click(bench);
      out.zoomed = { all: box(all), bench: box(bench), chain: box(chain),
                     reset: doc.getElementById("reset").getAttribute("display") };
      win.prompt = function () { return "uu_chain\\\\+0x12"; };
      click(doc.getElementById("search"));
      out.search = { matched: doc.getElementById("matched").textContent,
                     marked: doc.querySelectorAll("g.match").length,
                     chain_12ce: box(named(doc, "uu_chain+0x12ce")[0]),
                     bench: box(bench) };
      win.prompt = function () { return "uu_chain(+0x12"; };
      click(doc.getElementById("search"));
      var m = doc.getElementById("matched");
      out.bad = { matched: m.textContent, cls: m.getAttribute("class"),
                  marked: doc.querySelectorAll("g.match").length,
                  fill: m.ownerDocument.defaultView.getComputedStyle(m).fill };
      click(doc.getElementById("unsearch"));
      click(doc.getElementById("reset"));
      out.reset = { all: box(all), bench: box(bench), chain: box(chain),
                    reset: doc.getElementById("reset").getAttribute("display") };
    } catch (e) {
      out.error = String(e) + " " + e.stack;
    }
    document.getElementById("result").textContent = JSON.stringify(out);
  }, 200);
}
document.getElementById("fg").addEventListener("load", onload);
document.getElementById("narrow").addEventListener("load", onload);
</script>
</body></html>
"""


def chromium():
    for c in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(c):
            return c
    return None


def main():
    browser = chromium()
    if not browser:
        print("SKIP: flame graph browser test: no chromium (Debian: apt-get install chromium)")
        return 0
    if not os.path.exists(USTACK):
        print(f"FAIL: {USTACK} not built (make ustack)")
        return 1
    d = tempfile.mkdtemp(prefix="ustack-browser-")
    try:
        subprocess.run([USTACK, "-q", "--sysroot", "/nonexistent", "--svg",
                        os.path.join(d, "flame.svg"), TRACE], check=True)
        # Kernel and user frames, its title longer than a narrow window has room for.
        long = os.path.join(d, "a-recording-whose-name-is-longer-than-a-narrow-window.dat")
        shutil.copy(KSTACK, long)
        subprocess.run([USTACK, "-q", "--svg", os.path.join(d, "narrow.svg"), long],
                       check=True)
        with open(os.path.join(d, "test.html"), "w") as f:
            f.write(PAGE)
        r = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             "--allow-file-access-from-files", f"--user-data-dir={d}/profile",
             "--virtual-time-budget=10000", "--dump-dom",
             "file://" + os.path.join(d, "test.html")],
            capture_output=True, text=True, timeout=120)
        m = re.search(r'<pre id="result">(.*?)</pre>', r.stdout, re.S)
        if not m or m.group(1) == "pending":
            print("FAIL: the page did not run:", r.stdout[-2000:], r.stderr[-2000:])
            return 1
        res = json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<")
                         .replace("&gt;", ">").replace("&quot;", '"'))
        return check(res)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check(res):
    fails = []

    def want(cond, what):
        if not cond:
            fails.append(what)

    if "error" in res:
        print("FAIL:", res["error"])
        return 1
    full = res["svg_width"] - 2 * 10  # the graph's width inside its padding
    b, z, s, r = res["before"], res["zoomed"], res["search"], res["reset"]
    # Laid out to the window, not the file's 1200 pixels.
    want(abs(b["all"]["w"] - full) < 1, f"all spans the window: {b['all']}")
    # uu_bench is 3 of 23 samples before the click, the whole width after it.
    want(abs(b["bench"]["w"] - full * 3 / 23) < 1, f"uu_bench before: {b['bench']}")
    want(abs(z["bench"]["w"] - full) < 1, f"uu_bench zoomed: {z['bench']}")
    want(z["chain"]["shown"] is False, f"uu_chain hidden when zoomed: {z['chain']}")
    want(z["all"]["opacity"] == "0.5", f"the root dimmed when zoomed: {z['all']}")
    want(z["reset"] == "inline", "Reset zoom shown")
    # The search: uu_chain's frames at 0x12..: 20 of 23 samples, each counted once
    # though three frames of each stack match.
    want(s["matched"] == "Matched: 86.96% (20 of 23 samples)", f"matched: {s['matched']}")
    want(s["marked"] == 3, f"three frames marked: {s['marked']}")
    want(s["chain_12ce"]["fill"] == "rgb(230,0,230)", f"marked colour: {s['chain_12ce']}")
    want(s["bench"]["cls"] == "f", "uu_bench not marked")
    # A term that is not a regular expression: said so, in red, nothing marked.
    bad = res["bad"]
    want(bad["matched"].startswith("Search: Invalid regular expression")
         and bad["cls"] == "error" and bad["marked"] == 0
         and bad["fill"] == "rgb(192, 28, 40)", f"a bad regular expression: {bad}")
    want(abs(r["bench"]["w"] - full * 3 / 23) < 1 and r["chain"]["shown"]
         and r["reset"] == "none", f"reset: {r}")
    # The narrow window: the title, cut with "..", runs under none of the buttons;
    # labels drop the _[k] / _[i] marks, which the tooltips keep.
    n = res["narrow"]
    sp = n["spans"]
    want(n["shown"] == {"reset": "inline", "unsearch": "inline"}, f"buttons shown: {n['shown']}")
    want(n["title"].endswith("..") and n["full"].startswith(n["title"][:-2])
         and len(n["title"]) < len(n["full"]), f"the title cut: {n['title']!r} of {n['full']!r}")
    t = sp["title"]
    want(t["x"] >= sp["reset"]["x"] + sp["reset"]["w"], f"title clear of Reset zoom: {sp}")
    for b in ("search", "unsearch"):
        want(t["x"] + t["w"] <= sp[b]["x"], f"title clear of {b}: {sp}")
    for k in ("before", "zoomed"):
        want(n[k]["labels"] == 0 and n[k]["titles"] > 0, f"marks {k}: {n[k]}")
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print("ok: flame graph zooms on click, searches, resets in", "chromium")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
