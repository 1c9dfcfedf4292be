// Opens a published site's index.html from the file system (a file:// address) in headless
// Chromium and reports where the reader lands and the command it is told to serve the site with.
//
//   node site/file_check.mjs file:///path/to/html/index.html
//
// Prints one JSON object, {"url": ..., "serve": ...} (serve: the text of #fusebench-serve on the
// page reached, "" when there is none), and exits 0; 1 when the browser failed, 2 on bad arguments.
// Drives Debian's chromium ($CHROMIUM, default /usr/bin/chromium) with playwright-core, as
// browser_check.mjs does.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

async function main() {
  const args = process.argv.slice(2);
  if (args.length !== 1 || !args[0].startsWith("file:///")) {
    console.error("file_check: error: usage: file_check.mjs file:///PATH/index.html");
    process.exit(2);
  }
  const userDataDir = mkdtempSync(join(tmpdir(), "fusebench-chromium-"));
  let context, report, code = 0;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: FLAGS,
    });
    const page = context.pages()[0] || await context.newPage();
    await page.goto(args[0], { waitUntil: "load", timeout: 20000 });
    await page.waitForURL(/error\.html$/, { timeout: 10000 }).catch(() => {});
    await page.waitForLoadState("load");
    const serve = await page.$eval("#fusebench-serve", (el) => el.textContent).catch(() => "");
    report = { url: page.url(), serve };
  } catch (e) {
    report = { error: String(e.message).split("\n")[0] };
    code = 1;
  } finally {
    if (context) await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(report) + "\n", () => process.exit(code));
}

main();
