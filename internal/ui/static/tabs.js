// The job page's tabs: Timeline, Files, Diff, Desktop, Jupyter. A WAI-ARIA
// tab list (arrow keys, Home, End; the selected tab in the URL's hash, so
// it survives a reload). Panels load when first shown, from fragments the
// server renders and escapes (never HTML built here from the job's text).
// The desktop and Jupyter come through one-use viewer links: framed when
// they have origins of their own, else opened in a window of their own
// (a frame of the page's own origin could read the page).

import { api, apiError } from "./app.js";

const root = document.querySelector(".tabs[data-job]");
if (root) init(root);

function init(root) {
  const job = root.dataset.job;
  const base = `/ui/jobs/${encodeURIComponent(job)}`;
  const tabs = [...root.querySelectorAll('[role="tab"]')];
  const loaded = new Set();

  /** Put a message (text only) in el. */
  const say = (el, text, cls = "empty") => {
    const p = document.createElement("p");
    p.className = cls;
    p.textContent = text;
    el.replaceChildren(p);
  };

  /** Fetch a fragment into el; false (with the message shown) on error. */
  async function load(el, path) {
    el.setAttribute("aria-busy", "true");
    try {
      const resp = await api(path, { headers: { Accept: "text/html" } });
      if (!resp.ok) {
        say(el, (await apiError(resp)).message, "error");
        return false;
      }
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      el.replaceChildren(...doc.body.childNodes);
      return true;
    } catch (e) {
      say(el, `Could not load: ${e.message || e}`, "error");
      return false;
    } finally {
      el.removeAttribute("aria-busy");
    }
  }

  const loaders = {
    files: async () => load(root.querySelector("#files-panel .tree-root"),
      `${base}/tree?${root.querySelector("#files-panel").dataset.all ? "all=1&" : ""}path=`),
    diff: async () => loadDiff(),
    desktop: async () => openView("desktop"),
    jupyter: async () => openView("jupyter"),
  };

  function select(tab, focus) {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (focus) tab.focus();
    const name = tab.dataset.tab;
    const hash = name === "timeline" ? "" : `#${name}`;
    if (location.hash !== hash) history.replaceState(null, "", hash || location.pathname + location.search);
    if (!loaded.has(name) && loaders[name]) {
      loaded.add(name);
      loaders[name]().then(ok => { if (ok === false) loaded.delete(name); });
    }
  }

  const list = root.querySelector('[role="tablist"]');
  list.addEventListener("click", e => {
    const tab = e.target.closest('[role="tab"]');
    if (tab) select(tab, true);
  });
  list.addEventListener("keydown", e => {
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (next === undefined) return;
    e.preventDefault();
    select(tabs[(next + tabs.length) % tabs.length], true);
  });
  const fromHash = () => tabs.find(t => `#${t.dataset.tab}` === location.hash) || tabs[0];
  window.addEventListener("hashchange", () => select(fromHash(), false));
  select(fromHash(), false);

  // Files: directories open in place; a file opens in the viewer.
  const files = root.querySelector("#files-panel");
  const viewer = files.querySelector(".viewer");
  files.addEventListener("click", async e => {
    const all = e.target.closest("button.tree-all");
    if (all) {
      // From then on every directory opened lists its ignored entries too.
      files.dataset.all = "1";
      const into = all.closest(".tree-sub, .tree-root");
      await load(into, `${base}/tree?all=1&path=${encodeURIComponent(all.dataset.dir)}`);
      return;
    }
    if (e.target.closest("button.tree-refresh")) {
      await loaders.files();
      return;
    }
    const dir = e.target.closest("button.tree-dir");
    if (dir) {
      const open = dir.getAttribute("aria-expanded") === "true";
      dir.setAttribute("aria-expanded", String(!open));
      let sub = dir.nextElementSibling;
      if (!sub) {
        sub = document.createElement("div");
        sub.className = "tree-sub";
        dir.after(sub);
        const all = files.dataset.all ? "all=1&" : "";
        if (!await load(sub, `${base}/tree?${all}path=${encodeURIComponent(dir.dataset.dir)}`)) sub.remove();
      }
      if (sub.isConnected) sub.hidden = open;
      return;
    }
    const file = e.target.closest("button.tree-file");
    if (file) {
      for (const b of files.querySelectorAll("button.tree-file[aria-current]")) b.removeAttribute("aria-current");
      file.setAttribute("aria-current", "true");
      if (await load(viewer, `${base}/view?path=${encodeURIComponent(file.dataset.file)}`)) {
        viewer.querySelector("pre, p")?.focus?.();
      }
    }
  });

  // Diff: unified or side by side.
  const diffOut = root.querySelector("#diff-panel .diff-out");
  function loadDiff() {
    const view = root.querySelector('input[name="diff-view"]:checked')?.value || "unified";
    return load(diffOut, `${base}/diff?view=${encodeURIComponent(view)}`);
  }
  root.querySelector("#diff-panel .diff-views").addEventListener("change", () => loadDiff());

  // Desktop and Jupyter.
  async function links(panel) {
    const status = panel.querySelector(".view-status");
    status.textContent = "Asking for a viewer link…";
    const resp = await api(`/v1/jobs/${encodeURIComponent(job)}/viewer`, { method: "POST" });
    if (!resp.ok) {
      const err = await apiError(resp);
      status.textContent = resp.status === 409 ? `The job has ended: ${err.message}` : err.message;
      return null;
    }
    status.textContent = "";
    return resp.json();
  }
  const urlOf = (l, service) => (service === "desktop" ? l.desktop_url : l.jupyter_url);

  async function openView(service) {
    const panel = root.querySelector(`#${service}-panel .view`);
    const frame = panel.querySelector(".view-frame");
    if (!frame) return true; // ended, or opened by its button
    const l = await links(panel);
    if (!l) return false;
    const f = document.createElement("iframe");
    f.title = `The job's ${service}`;
    f.referrerPolicy = "no-referrer";
    f.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms allow-downloads allow-popups allow-modals");
    f.src = urlOf(l, service);
    frame.replaceChildren(f);
    return true;
  }
  for (const button of root.querySelectorAll(".view-open")) {
    button.addEventListener("click", async () => {
      const service = button.closest("[data-view]").dataset.view;
      const l = await links(button.closest(".view"));
      if (l) window.open(urlOf(l, service), "_blank", "noopener,noreferrer");
    });
  }
}
