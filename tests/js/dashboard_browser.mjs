// The gateway's /dashboard in headless Chromium (the system browser, driven by playwright-core):
// the page loads with no console error and no request leaving the gateway, every panel shows
// data, the hit rates on the page equal /stats within display rounding, and a screenshot is
// written. Run by tests/browser/dashboard_browser_test.cpp:
//
//   node dashboard_browser.mjs http://127.0.0.1:PORT out/dashboard.png [/usr/bin/chromium [ADMIN_KEY]]
//
// With ADMIN_KEY the gateway has one: /dashboard first answers 401 with the login form, which
// the script fills in as a user would; the session cookie then carries the page's /stats polls.
//
// Prints a JSON summary; exits 1 with the failures listed when a check fails.
import { chromium } from "playwright-core";

const [base, screenshot, executablePath = "/usr/bin/chromium", adminKey = ""] = process.argv.slice(2);
if (!base || !screenshot) {
  console.error("usage: node dashboard_browser.mjs BASE_URL SCREENSHOT.png [CHROMIUM]");
  process.exit(2);
}

const failures = [];
const consoleErrors = [];
const external = [];
const summary = {};

const browser = await chromium.launch({
  executablePath,
  // Root in a container has no user namespace for Chromium's sandbox.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 }, deviceScaleFactor: 1 });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push("uncaught: " + e.message));
  // Offline by construction: nothing but the gateway itself (and data: URLs) may be asked for.
  page.on("request", (r) => {
    const url = r.url();
    if (!url.startsWith(base) && !url.startsWith("data:")) external.push(url);
  });

  let res = await page.goto(base + "/dashboard", { waitUntil: "load" });
  if (adminKey) {
    summary.login = { before: res ? res.status() : 0 };
    if (summary.login.before !== 401) failures.push("GET /dashboard before signing in answered " + summary.login.before);
    await page.fill("#key", "not the key");
    [res] = await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
    summary.login.wrong_key = res ? res.status() : 0;
    if (summary.login.wrong_key !== 401) failures.push("a wrong key answered " + summary.login.wrong_key);
    await page.fill("#key", adminKey);
    [res] = await Promise.all([page.waitForNavigation(), page.click("button[type=submit]")]);
    summary.login.url = page.url();
    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === "prefixgate_admin");
    summary.login.cookie = session ? { httpOnly: session.httpOnly, sameSite: session.sameSite } : null;
    if (!session || !session.httpOnly || session.sameSite !== "Strict") {
      failures.push("no HttpOnly, SameSite=Strict session cookie: " + JSON.stringify(cookies));
    }
    if (await page.evaluate(() => document.cookie.includes("prefixgate_admin"))) {
      failures.push("the session cookie is readable from scripts");
    }
    // The browser's own reports of the two 401s before signing in are not the page's errors.
    consoleErrors.length = 0;
  }
  summary.status = res ? res.status() : 0;
  if (summary.status !== 200) failures.push("GET /dashboard answered " + summary.status);

  await page.waitForFunction(() => document.body.dataset.rendered, null, { timeout: 20000 });
  // Every panel reaches data-state="data" (the page marks a panel "empty" when it has none).
  const allData = () =>
    [...document.querySelectorAll("[data-panel]")].every((p) => p.dataset.state === "data");
  await page.waitForFunction(allData, null, { timeout: 20000 }).catch(() => {});
  summary.panels = await page.$$eval("[data-panel]", (ps) =>
    Object.fromEntries(ps.map((p) => [p.dataset.panel, p.dataset.state || "unrendered"])),
  );
  for (const [name, state] of Object.entries(summary.panels)) {
    if (state !== "data") failures.push(`panel ${name} shows no data (${state})`);
  }
  if (Object.keys(summary.panels).length < 9) failures.push("expected at least 9 panels");

  // Charts drew something: each chart has a path or a bar.
  summary.charts = await page.$$eval(".chart", (cs) =>
    Object.fromEntries(cs.map((c) => [c.id, c.querySelectorAll("path, rect").length])),
  );
  for (const [id, marks] of Object.entries(summary.charts)) {
    if (marks === 0) failures.push(`chart ${id} drew nothing`);
  }

  // The hit rates on the page equal /stats within rounding (one decimal of a percent). The page
  // polls every second, so compare against the /stats document of the same sample.
  let matched = false;
  for (let attempt = 0; attempt < 5 && !matched; attempt++) {
    const auth = adminKey ? { authorization: "Bearer " + adminKey } : {};
    const stats = await (await fetch(base + "/stats", { headers: auth })).json();
    await page.waitForFunction((t) => Number(document.body.dataset.rendered) >= t, stats.now_ms, { timeout: 5000 });
    const read = async (id) => (await page.textContent(`[data-testid="${id}"]`)).trim();
    const shown = { total: await read("hit-rate-total"), window: await read("hit-rate-window") };
    const rendered = Number(await page.evaluate(() => document.body.dataset.rendered));
    if (rendered !== stats.now_ms) continue;  // a newer sample arrived in between: again
    summary.hit_rate = { page: shown, stats: { total: stats.totals.hit_rate, window: stats.window.hit_rate } };
    matched = true;
    for (const key of ["total", "window"]) {
      const want = key === "total" ? stats.totals.hit_rate : stats.window.hit_rate;
      const got = parseFloat(shown[key]) / 100;
      if (want === null || !Number.isFinite(got) || Math.abs(got - want) > 0.0005 + 1e-9) {
        failures.push(`hit rate (${key}): page shows ${shown[key]}, /stats says ${want}`);
      }
    }
    if (!(stats.totals.hit_rate > 0)) failures.push("/stats reports no cache hits at all");
  }
  if (!matched) failures.push("could not read the page and /stats at the same sample");

  await page.screenshot({ path: screenshot, fullPage: true });
  summary.screenshot = screenshot;
} catch (e) {
  failures.push("exception: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}

if (consoleErrors.length) failures.push("console errors: " + JSON.stringify(consoleErrors));
if (external.length) failures.push("requests outside the gateway: " + JSON.stringify(external));
summary.console_errors = consoleErrors;
summary.failures = failures;
console.log(JSON.stringify(summary, null, 1));
process.exit(failures.length ? 1 : 0);
