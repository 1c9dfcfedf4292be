// Opens a published fusebench asv site in headless Chromium and checks that it works offline. asv's
// page is asv.html (index.html is fusebench's landing page).
//
//   node site/browser_check.mjs http://127.0.0.1:PORT [--machine h200] [--benchmark suite.Gelu.track_bandwidth]
//                               [--block-external] [--screenshot FILE.png] [--x-axis shape]
//                               [--legend open|click|hidden] [--list] [--pages] [--landing]
//
// Drives Debian's chromium ($CHROMIUM, default /usr/bin/chromium) with playwright-core (pinned in
// site/package-lock.json; it never downloads a browser). Prints one JSON object and exits 0 when
//   - the benchmark grid lists the fusebench benchmarks (a.benchmark-container links),
//   - the graph of --benchmark has a flot plot with at least one series with points (`longest`:
//     the most points of one series, one per commit), and a selector button for --machine,
//   - no request failed (requestfailed: refused connection, DNS failure, blocked), no response had
//     a status >= 400, no uncaught page error, and the page never went to asv's error.html.
//     One exception, listed apart as `missing_graphs`: a 404 for a graph file (graphs/...json).
//     asv's page asks for the graph of every machine-field combination of index.json's
//     graph_param_list, and `asv publish` writes one only where the benchmark has results (a run
//     of one op on a new host: the other ops have none there); the page counts such a miss and
//     draws the rest (graphdisplay.js). The caller checks that each one is absent from the site;
// else 1 (2 on bad arguments). --block-external aborts every request to another origin, as a
// machine with no internet would (the check then does not depend on this machine's network);
// such requests are reported as failed.
// The report also says what the reader sees first: `hash` (the graph's address once asv opened it,
// with the parameter values it selected), `titles` (the grid's tile titles) and `drawn` (series
// with at least one point inside the plotted x range: a series whose x values are null or shifted
// off the axis is loaded but not drawn). --x-axis opens the graph against that parameter.
// The graph's report also has `labels` and `colors` (each series'), `x_range` ([min, max] of the
// x axis), `categories` (a category axis's labels, in order), `y_top` and `data_top` (the y axis's
// top and the highest point drawn), `clipped` (selector buttons whose label is wider than the
// button), `visible_buttons` ({panel heading: its visible buttons' labels}).
// --legend open reports the legend as the graph opens, click after pressing the graph's legend
// button once, hidden opens the graph with show-legend=false; the report then says `legend_rows`
// (rows of the legend flot drew, on the plot or beside it), `legend_over_plot` (the legend's box
// overlaps the plot's) and `legend_hash` (the address after it). --click-x-axis NAME presses that
// x-axis button once the graph has loaded, before the report is taken. --list also opens the benchmark list (#summarylist) and reports `changes`:
// [benchmark text, recent change text, its colour class ("positive-change": red, "negative-change":
// green, "" none)] for every row with a change. --pages also opens fusebench's pages (plots/, runs/,
// verdicts/) and reports `pages`: per page its navigation bar's tabs, the active one, whether the
// bar is styled (bootstrap loaded: position fixed), its h2 headings, for the Verdicts page its
// case rows ([status, link text, href]), its in-page links whose target is missing (`dead_anchors`)
// and the smallest left padding of a table cell (`cell_padding`, px); also asv's Regressions view
// (`regressions_note`: the text and links of the note above its list). --landing opens the landing
// page (index.html) and reports `landing`: the same as a page, and per GPU section its id and
// tables ([title, header cells, rows of [cell text, bold]]), and its `scripts` (count); and
// `old_link`: where index.html#<benchmark>?machine=<machine> (an address of asv's page from before
// it moved to asv.html) ends.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

// Flags for a closed network: without the background-networking ones Chromium floods refused
// connections at start-up. The user data dir is new and empty (launchPersistentContext).
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const TIMEOUT_MS = 20000;

// Wait until `selector` is on the page or asv gave up and went to its error page.
async function waitFor(page, selector) {
  await page.waitForFunction((sel) => document.querySelector(sel) || location.href.includes("error.html"),
    selector, { timeout: TIMEOUT_MS });
  if (page.url().includes("error.html")) throw new Error("asv's error page was shown instead");
}

function parseArgs(argv) {
  const opts = { machine: "h200", benchmark: "suite.Gelu.track_bandwidth", blockExternal: false };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--machine") opts.machine = argv[++i];
    else if (argv[i] === "--benchmark") opts.benchmark = argv[++i];
    else if (argv[i] === "--block-external") opts.blockExternal = true;
    else if (argv[i] === "--screenshot") opts.screenshot = argv[++i];
    else if (argv[i] === "--x-axis") opts.xAxis = argv[++i];
    else if (argv[i] === "--click-x-axis") opts.clickXAxis = argv[++i];
    else if (argv[i] === "--legend") opts.legend = argv[++i];
    else if (argv[i] === "--list") opts.list = true;
    else if (argv[i] === "--pages") opts.pages = true;
    else if (argv[i] === "--landing") opts.landing = true;
    else rest.push(argv[i]);
  }
  if (rest.length !== 1 || !/^http:\/\/(127\.0\.0\.1|localhost)(:\d+)?\/?$/.test(rest[0]) ||
      !opts.machine || !opts.benchmark || ![undefined, "open", "click", "hidden"].includes(opts.legend)) {
    console.error("browser_check: error: usage: browser_check.mjs http://127.0.0.1:PORT " +
      "[--machine NAME] [--benchmark NAME] [--block-external] [--legend open|click|hidden]");
    process.exit(2);
  }
  opts.origin = new URL(rest[0]).origin;
  return opts;
}

// The legend flot drew (as a table: on the plot in div.legend, or in the container it was given)
// after the legend button was pressed once (`click`) or as the address asked: its rows, whether
// its box overlaps the plot's, and the address then.
async function legend(page, mode) {
  const rowsSel = "#main-graph .legend table tr, #fusebench-legend table tr";
  if (mode === "click") {
    await page.click("#show-legend");
    await page.waitForFunction(() => /show-legend=/.test(location.hash), null, { timeout: 5000 }).catch(() => {});
    await page.waitForTimeout(500);  // the graph redrawn from the new address
  } else {
    try {
      await page.waitForFunction((sel) => Array.from(document.querySelectorAll(sel))
        .some((tr) => tr.getBoundingClientRect().height > 0), rowsSel, { timeout: mode === "open" ? 5000 : 1000 });
    } catch (e) { /* no legend drawn: reported as 0 rows */ }
  }
  return page.evaluate((sel) => {
    const visible = Array.from(document.querySelectorAll(sel)).filter((tr) => tr.getBoundingClientRect().height > 0);
    const plot = document.querySelector("#main-graph").getBoundingClientRect();
    const over = visible.some((tr) => {
      const r = tr.getBoundingClientRect();
      return r.left < plot.right && r.right > plot.left && r.top < plot.bottom && r.bottom > plot.top;
    });
    return { legend_rows: visible.length, legend_over_plot: over, legend_hash: decodeURIComponent(location.hash) };
  }, rowsSel);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const report = { ok: false, failed: [], bad_status: [], missing_graphs: [], page_errors: [], external: [],
    error_page: false, benchmarks: [], titles: [], machine_button: false, series: 0, points: 0,
    longest: 0, drawn: 0, hash: "", legend_rows: 0, legend_over_plot: false, legend_hash: "", changes: [], pages: {}, problems: [] };
  const userDataDir = mkdtempSync(join(tmpdir(), "fusebench-chromium-"));
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: FLAGS,
    });
    if (opts.blockExternal) {
      await context.route("**/*", (route) => new URL(route.request().url()).origin === opts.origin
        ? route.continue() : route.abort("internetdisconnected"));
    }
    const page = context.pages()[0] || await context.newPage();
    page.on("request", (r) => {
      if (!r.url().startsWith(opts.origin) && !r.url().startsWith("data:")) report.external.push(r.url());
    });
    page.on("requestfailed", (r) => report.failed.push(`${r.url()} (${r.failure()?.errorText})`));
    page.on("response", (r) => {
      if (r.status() < 400) return;
      const path = new URL(r.url()).pathname;
      if (r.status() === 404 && path.startsWith("/graphs/") && path.endsWith(".json")) report.missing_graphs.push(r.url());
      else report.bad_status.push(`${r.url()} (${r.status()})`);
    });
    page.on("pageerror", (e) => report.page_errors.push(String(e.message || e).split("\n")[0]));
    page.on("framenavigated", (f) => { if (f === page.mainFrame() && f.url().includes("error.html")) report.error_page = true; });

    await page.goto(`${opts.origin}/asv.html`, { waitUntil: "load", timeout: TIMEOUT_MS });
    try {
      await waitFor(page, "a.benchmark-container");
      report.benchmarks = await page.$$eval("a.benchmark-container",
        (links) => links.map((a) => decodeURIComponent(a.getAttribute("href").replace(/^#/, ""))));
      report.titles = await page.$$eval("a.benchmark-container .benchmark-text",
        (els) => els.map((el) => el.textContent.trim()));
    } catch (e) {
      report.problems.push(`no benchmark grid: ${String(e.message).split("\n")[0]}`);
    }

    const xAxis = opts.xAxis ? `&x-axis=${encodeURIComponent(opts.xAxis)}` : "";
    const legendOn = opts.legend === "hidden" ? "&show-legend=false" : "";
    await page.goto(`${opts.origin}/asv.html#${opts.benchmark}?machine=${opts.machine}${xAxis}${legendOn}`,
      { waitUntil: "load", timeout: TIMEOUT_MS });
    try {
      await waitFor(page, "#main-graph canvas.flot-base");
      await page.waitForFunction(() => {
        const plot = window.jQuery && window.jQuery("#main-graph").data("plot");
        return plot && plot.getData().some((s) => s.data.length > 0);
      }, null, { timeout: TIMEOUT_MS });
      if (opts.clickXAxis) {  // as a reader does: the graph loaded, then its x-axis button pressed
        await page.locator("#graphdisplay-navigation-params .btn", { hasText: opts.clickXAxis }).first().click();
        await page.waitForFunction((x) => location.hash.includes(`x-axis=${x}`), opts.clickXAxis, { timeout: TIMEOUT_MS });
        await page.waitForTimeout(1000);
      }
      const shape = await page.evaluate(() => {
        const data = window.jQuery("#main-graph").data("plot").getData();
        const inRange = (s) => {
          const ps = s.datapoints.pointsize, pts = s.datapoints.points, ax = s.xaxis;
          for (let i = 0; i < pts.length; i += ps) {
            if (Number.isFinite(pts[i]) && pts[i + 1] != null && pts[i] >= ax.min && pts[i] <= ax.max) return true;
          }
          return false;
        };
        const plot = window.jQuery("#main-graph").data("plot");
        const xa = plot.getXAxes()[0];
        const tops = data.flatMap((s) => s.data.map((p) => p[1]).filter((y) => y !== null));
        const cats = xa.options.mode === "categories" ? Object.entries(xa.categories || {}) : [];
        const panels = {};
        document.querySelectorAll("#graphdisplay-navigation .panel, #graphdisplay-navigation-params .panel")
          .forEach((p) => {
            const head = p.querySelector(".panel-heading");
            if (head) panels[head.textContent.trim()] = Array.from(p.querySelectorAll(".btn"))
              .filter((b) => b.getBoundingClientRect().height > 0).map((b) => b.textContent.trim());
          });
        return { series: data.length, points: data.reduce((n, s) => n + s.data.length, 0),
          longest: Math.max(...data.map((s) => s.data.length)), drawn: data.filter(inRange).length,
          hash: decodeURIComponent(location.hash), labels: data.map((s) => s.label), colors: data.map((s) => s.color),
          x_range: [xa.min, xa.max], categories: cats.sort((a, b) => a[1] - b[1]).map((c) => c[0]),
          y_top: plot.getYAxes()[0].max, data_top: tops.length ? Math.max(...tops) : null,
          clipped: Array.from(document.querySelectorAll("#graphdisplay-navigation-params .btn"))
            .filter((b) => b.getBoundingClientRect().height > 0 && b.scrollWidth > b.clientWidth + 1)
            .map((b) => b.textContent.trim()),
          visible_buttons: panels };
      });
      Object.assign(report, shape);
      report.machine_button = await page.$$eval("#graphdisplay-state-params a, #graphdisplay-state-params button",
        (els, m) => els.some((el) => el.textContent.trim() === m), opts.machine);
      if (opts.legend) Object.assign(report, await legend(page, opts.legend));
    } catch (e) {
      report.problems.push(`no graph of ${opts.benchmark}: ${String(e.message).split("\n")[0]}`);
    }
    if (opts.list) {
      try {
        await page.goto(`${opts.origin}/asv.html#summarylist?machine=${opts.machine}`,
          { waitUntil: "load", timeout: TIMEOUT_MS });
        await waitFor(page, "#summarylist-body table tbody tr td.change a");
        report.changes = await page.$$eval("#summarylist-body table tbody tr", (trs) => trs
          .filter((tr) => tr.querySelector("td.change a"))
          .map((tr) => {
            const td = tr.querySelector("td.change");
            const cls = ["positive-change", "negative-change"].find((c) => td.classList.contains(c)) || "";
            return [tr.querySelector("td").textContent.trim(), td.textContent.trim(), cls];
          }));
      } catch (e) {
        report.problems.push(`no benchmark list: ${String(e.message).split("\n")[0]}`);
      }
    }
    if (opts.pages) {
      try {
        await page.goto(`${opts.origin}/asv.html#/regressions`, { waitUntil: "load", timeout: TIMEOUT_MS });
        await waitFor(page, "#regressions-body table");
        report.regressions_note = await page.evaluate(() => {
          const note = document.querySelector("#fusebench-regressions-note");
          const shown = note && note.getBoundingClientRect().height > 0;
          return shown ? { text: note.textContent.replace(/\s+/g, " ").trim(),
            links: Array.from(note.querySelectorAll("a")).map((a) => a.getAttribute("href")) } : null;
        });
      } catch (e) {
        report.problems.push(`no regressions view: ${String(e.message).split("\n")[0]}`);
      }
    }
    const pages = (opts.pages ? ["plots", "runs", "verdicts"] : []).concat(opts.landing ? ["landing"] : []);
    for (const name of pages) {
      try {
        const path = name === "landing" ? "index.html" : `${name}/index.html`;
        await page.goto(`${opts.origin}/${path}`, { waitUntil: "load", timeout: TIMEOUT_MS });
        if (name === "landing") {  // an address of asv's page from before it moved: sent on
          await page.goto(`${opts.origin}/index.html#${opts.benchmark}?machine=${opts.machine}`,
            { waitUntil: "load", timeout: TIMEOUT_MS });
          await page.waitForURL(/asv\.html/, { timeout: 5000 }).catch(() => {});
          await page.waitForLoadState("networkidle", { timeout: TIMEOUT_MS }).catch(() => {});  // its graph loaded
          report.old_link = decodeURIComponent(page.url().slice(opts.origin.length));
          await page.goto(`${opts.origin}/${path}`, { waitUntil: "load", timeout: TIMEOUT_MS });
        }
        report.pages[name] = await page.evaluate(() => {
          const cells = Array.from(document.querySelectorAll(".fb-page table td, .fb-page table th"));
          const tables = (root) => Array.from(root.querySelectorAll("table.fb-table")).map((t) => [
            t.previousElementSibling ? t.previousElementSibling.textContent.trim() : "",
            Array.from(t.querySelectorAll("tr:first-child th")).map((th) => th.textContent.trim()),
            Array.from(t.querySelectorAll("tr")).slice(1).map((tr) => Array.from(tr.querySelectorAll("td"))
              .map((td) => [td.textContent.trim(), td.querySelector("b") !== null]))]);
          const nav = document.querySelector("nav#nav");
          return {
            tabs: nav ? Array.from(nav.querySelectorAll("li[id^='nav-li-'] a")).map((a) => a.textContent.trim()) : [],
            active: Array.from(document.querySelectorAll("nav#nav li.active a")).map((a) => a.textContent.trim()),
            styled: nav ? getComputedStyle(nav).position === "fixed" : false,
            headings: Array.from(document.querySelectorAll("h2")).map((h) => h.textContent.trim()),
            cases: Array.from(document.querySelectorAll("table.cases tr[data-status]")).map((tr) => {
              const a = tr.querySelector("a");
              return [tr.dataset.status, a ? a.textContent.trim() : "", a ? a.href : ""];
            }),
            dead_anchors: Array.from(document.querySelectorAll("a[href^='#']"))
              .map((a) => a.getAttribute("href").slice(1)).filter((id) => !document.getElementById(id)),
            anchors: document.querySelectorAll("a[href^='#']").length,
            cell_padding: cells.length ? Math.min(...cells.map((c) => parseFloat(getComputedStyle(c).paddingLeft))) : null,
            sections: Array.from(document.querySelectorAll(".fb-machine, .fb-pair")).map((sec) => ({
              id: sec.id, heading: (sec.querySelector("h2, h3") || {}).textContent, tables: tables(sec),
              verdict: (sec.querySelector(".fb-verdict") || {}).textContent,
              links: Array.from(sec.querySelectorAll(".fb-links a")).map((a) => a.getAttribute("href")) })),
            scripts: document.scripts.length,
          };
        });
      } catch (e) {
        report.problems.push(`no page ${name}: ${String(e.message).split("\n")[0]}`);
      }
    }
    if (page.url().includes("error.html")) report.error_page = true;
    if (opts.screenshot) await page.screenshot({ path: opts.screenshot, fullPage: true });
  } catch (e) {
    report.problems.push(`browser: ${String(e.message).split("\n")[0]}`);
  } finally {
    if (context) await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
  if (!report.benchmarks.length) report.problems.push("the benchmark grid is empty");
  if (!report.points) report.problems.push("the graph has no points");
  if (!report.machine_button) report.problems.push(`no selector button for machine ${opts.machine}`);
  if (report.failed.length) report.problems.push(`${report.failed.length} failed request(s)`);
  if (report.bad_status.length) report.problems.push(`${report.bad_status.length} error response(s)`);
  if (report.page_errors.length) report.problems.push(`${report.page_errors.length} page error(s)`);
  if (report.error_page) report.problems.push("asv's error page was shown");
  report.ok = report.problems.length === 0;
  // exit once the report is written: process.exit right after a large write to a pipe cuts it off
  process.stdout.write(JSON.stringify(report, null, 1) + "\n", () => process.exit(report.ok ? 0 : 1));
}

main();
