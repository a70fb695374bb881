// The job page: its timeline grows and its header follows the job while
// it runs, through the API's event stream (a running step's card grows
// with its output; see "Steps" below); "Show earlier" loads older
// events; Cancel and the message box talk to the API. Every piece of HTML
// comes rendered (and escaped) by the server; nothing here builds markup
// from a job's text.
import { api, apiError, followSSE } from "./app.js";

const job = document.getElementById("job");
const timeline = document.getElementById("timeline");
const list = document.getElementById("events");
if (job && timeline && list) start();

function start() {
  const headerURL = job.dataset.header;
  const eventsURL = job.dataset.events;
  const timelineURL = headerURL.replace(/\/header$/, "/timeline");
  let last = Number(timeline.dataset.last) || 0; // last seq rendered
  let seen = last; // last seq the stream announced
  let following = false;
  let flushing = null;
  let again = false;
  let headerDirty = false;
  let networkDirty = false;
  let timer = 0;

  const final = () => document.querySelector("#job-summary [data-final]")?.dataset.final === "true";
  const atBottom = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 40;

  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html; // the server's rendered, escaped fragment
    return t.content;
  }

  async function refreshHeader() {
    const resp = await api(headerURL);
    if (!resp.ok) throw await apiError(resp);
    const html = await resp.text();
    const box = document.getElementById("job-summary");
    const focused = document.activeElement && box.contains(document.activeElement) ? document.activeElement.id : "";
    const open = box.querySelector("details.task")?.open;
    box.replaceChildren(fragment(html));
    if (open) box.querySelector("details.task").open = true;
    if (focused) document.getElementById(focused)?.focus();
  }

  // pull fetches the events after the last rendered one, page by page,
  // and appends them; the header follows when something changed it.
  async function pull() {
    while (seen > last) {
      const stick = atBottom();
      const resp = await api(`${timelineURL}?after=${last}`);
      if (!resp.ok) throw await apiError(resp);
      const to = Number(resp.headers.get("X-Timeline-Last")) || last;
      appendItems(fragment(await resp.text()));
      document.getElementById("no-events")?.remove();
      if (to <= last) break;
      last = to;
      timeline.dataset.last = String(last);
      if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
    }
    if (headerDirty) {
      headerDirty = false;
      await refreshHeader();
    }
    if (networkDirty) {
      networkDirty = false;
      await refreshNetwork();
    }
    if (seen <= last && final()) stopRunning();
    updateJump();
  }

  // ---- Steps: a tool call, its output as it runs and its result in one
  // card (li.ev-step). The server renders a page's events of one call in
  // one card; a card of a later page without the call (no data-head) is
  // joined to the running card of its data-key here.
  const LIVE_CAP = 64 * 1024; // characters of a running step's output kept
  const KEEP_OPEN = 3; // finished steps left open at the end

  function runningCard(key) {
    const cards = list.querySelectorAll(`li.ev-step.step-running[data-key="${CSS.escape(key)}"]`);
    return cards.length ? cards[cards.length - 1] : null;
  }

  // join makes card a take card b, which comes after it in the job's
  // log: b's output after a's, and b's result and status if b has ended.
  function join(a, b) {
    const liveA = a.querySelector(".step-live"), liveB = b.querySelector(".step-live");
    const pre = liveA.querySelector("pre");
    const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    pre.append(...liveB.querySelector("pre").childNodes);
    if (!liveB.querySelector(".step-cut").hidden) liveA.querySelector(".step-cut").hidden = false;
    capLive(liveA);
    if (!a.dataset.head && !b.classList.contains("step-running")) {
      a.querySelector(".ev-kind").replaceWith(b.querySelector(".ev-kind"));
      a.querySelector(".step-line").replaceWith(b.querySelector(".step-line"));
    }
    if (!b.classList.contains("step-running")) {
      a.querySelector(".step-status").replaceWith(b.querySelector(".step-status"));
      a.querySelector(".step-result").replaceWith(b.querySelector(".step-result"));
      const step = b.querySelector(".ev-step");
      if (step && !a.querySelector(".ev-step")) a.querySelector(".step-status").after(step);
      a.classList.remove("step-running");
      a.classList.add(b.classList.contains("step-stopped") ? "step-stopped" : "step-done");
      if (b.classList.contains("ev-error")) a.classList.add("ev-error");
      if (b.dataset.replace) liveA.remove();
      else liveA.hidden = !pre.hasChildNodes();
    } else {
      liveA.hidden = false;
    }
    if (stick && liveA.isConnected) pre.scrollTop = pre.scrollHeight;
    b.remove();
  }

  // capLive keeps the last LIVE_CAP characters of a card's output, in
  // whole pieces, and says when it dropped some.
  function capLive(live) {
    const pre = live.querySelector("pre");
    let total = pre.textContent.length;
    while (total > LIVE_CAP && pre.childNodes.length > 1) {
      total -= pre.firstChild.textContent.length;
      pre.firstChild.remove();
      live.querySelector(".step-cut").hidden = false;
    }
  }

  // appendItems adds a page of new events at the end.
  function appendItems(frag) {
    for (const li of [...frag.children]) {
      const card = li.matches("li.ev-step:not([data-head])") && runningCard(li.dataset.key);
      if (card) join(card, li);
      else list.append(li);
    }
    collapse();
  }

  // prependItems adds a page of earlier events at the start: a running
  // card of it takes the cards of its call that a later page began.
  function prependItems(frag) {
    const cards = [...frag.querySelectorAll("li.ev-step.step-running[data-head]")];
    list.prepend(frag);
    for (const a of cards) {
      for (;;) {
        const b = [...list.querySelectorAll(`li.ev-step[data-key="${CSS.escape(a.dataset.key)}"]:not([data-head])`)]
          .find((e) => a.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING);
        if (!b || !a.classList.contains("step-running")) break;
        join(a, b);
      }
    }
    if (final()) stopRunning();
  }

  // collapse folds finished steps but the last few, unless the user
  // opened or closed one.
  function collapse() {
    const done = [...list.querySelectorAll("li.ev-step:not(.step-running) > details.step:not([data-user])")];
    for (const d of done.slice(0, -KEEP_OPEN)) d.open = false;
  }
  list.addEventListener("click", (e) => {
    const s = e.target.closest("details.step > summary");
    if (s) s.parentElement.dataset.user = "1";
  });

  // stopRunning marks the steps still running when the job has ended.
  function stopRunning() {
    for (const li of list.querySelectorAll("li.ev-step.step-running")) {
      li.classList.replace("step-running", "step-stopped");
      li.querySelector(".step-status").replaceChildren("not finished");
    }
  }

  // The running steps' elapsed time.
  function tick() {
    for (const el of list.querySelectorAll(".step-running .elapsed")) {
      const s = Math.max(0, Math.floor((Date.now() - Date.parse(el.dataset.since)) / 1000));
      el.textContent = s < 60 ? `${s}s` : `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
    }
  }
  tick();
  setInterval(tick, 1000);

  // Jump to latest: shown while the user has scrolled up the timeline.
  const jump = document.getElementById("jump-latest");
  function updateJump() {
    if (jump) jump.hidden = atBottom() || !!timeline.closest("[hidden]");
  }
  window.addEventListener("scroll", updateJump, { passive: true });
  updateJump();
  jump?.addEventListener("click", () => {
    window.scrollTo(0, document.documentElement.scrollHeight);
    jump.hidden = true;
  });

  // The Network section: reloaded when a connection or a policy change
  // comes, and replaced by the answer of "Allow for this job".
  const network = document.getElementById("network");
  async function refreshNetwork() {
    if (!network) return;
    const resp = await api(network.dataset.url);
    if (!resp.ok) throw await apiError(resp);
    showNetwork(await resp.text());
  }
  // showNetwork puts the section's HTML in place; a job that has no
  // network and tried none has an empty section, hidden.
  function showNetwork(html) {
    network.replaceChildren(fragment(html));
    network.hidden = !network.querySelector("h2");
  }
  network?.addEventListener("click", async (e) => {
    const btn = e.target.closest("button.allow-host");
    if (!btn) return;
    btn.disabled = true;
    const out = network.querySelector(".net-error");
    const resp = await api(network.dataset.allow, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ host: btn.dataset.host }),
    });
    if (!resp.ok) {
      out.textContent = (await apiError(resp)).message;
      out.hidden = false;
      btn.disabled = false;
      return;
    }
    showNetwork(await resp.text());
  });

  // flush runs pull, once at a time: a call during one runs it again
  // after it, so no event is left behind.
  async function flush() {
    timer = 0;
    if (flushing) {
      again = true;
      return flushing;
    }
    flushing = (async () => {
      do {
        again = false;
        await pull();
      } while (again);
    })();
    try {
      await flushing;
    } finally {
      flushing = null;
    }
  }

  function schedule() {
    if (!timer) timer = setTimeout(() => flush().catch(report), 250);
  }

  function report(e) {
    console.warn("job page:", e.message || e);
  }

  // follow reads the stream from the last seq seen until the job ends;
  // a stream that ends or fails while the job is not final is reopened.
  async function follow() {
    if (following) return;
    following = true;
    try {
      for (let wait = 500; ; wait = Math.min(wait * 2, 5000)) {
        try {
          await followSSE(`${eventsURL}?after=${seen}`, (ev) => {
            const seq = Number(ev.id);
            if (seq > seen) seen = seq;
            if (ev.event === "state" || ev.event === "model" || ev.event === "message" || ev.event === "git") headerDirty = true;
            if (ev.event === "network" || ev.event === "network_policy") networkDirty = true;
            schedule();
            wait = 500;
          });
        } catch (e) {
          report(e);
        }
        headerDirty = true;
        await flush().catch(report);
        if (final()) return;
        await new Promise((r) => setTimeout(r, wait));
      }
    } finally {
      following = false;
    }
  }

  // Show earlier: the page before the first rendered event.
  timeline.addEventListener("click", async (e) => {
    const btn = e.target.closest("#earlier");
    if (!btn) return;
    btn.disabled = true;
    try {
      const resp = await api(btn.dataset.url);
      if (!resp.ok) throw await apiError(resp);
      const first = Number(resp.headers.get("X-Timeline-First")) || 1;
      // The item the view stays on: not a card the earlier page's may take.
      const firstItem = [...list.children].find((e) => !e.matches("li.ev-step:not([data-head])"));
      const y = firstItem ? firstItem.getBoundingClientRect().top : 0;
      prependItems(fragment(await resp.text()));
      if (firstItem) window.scrollBy(0, firstItem.getBoundingClientRect().top - y);
      if (first > 1) {
        btn.dataset.url = btn.dataset.url.replace(/before=\d+/, `before=${first}`);
        btn.disabled = false;
      } else {
        btn.closest(".earlier").remove();
      }
    } catch (err) {
      btn.disabled = false;
      report(err);
    }
  });

  // Cancel (the button is re-rendered with the header: delegate).
  job.addEventListener("click", async (e) => {
    const btn = e.target.closest("#cancel");
    if (!btn) return;
    btn.disabled = true;
    const out = document.getElementById("cancel-error");
    out.hidden = true;
    const resp = await api(btn.dataset.url, { method: "POST" });
    if (!resp.ok) {
      out.textContent = (await apiError(resp)).message;
      out.hidden = false;
      btn.disabled = false;
      return;
    }
    await refreshHeader().catch(report);
  });

  // The message box steers a running job or continues an ended one.
  const form = document.getElementById("message");
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = form.elements.message;
    const out = document.getElementById("message-error");
    const button = form.querySelector("button[type=submit]");
    out.hidden = true;
    text.removeAttribute("aria-invalid");
    if (!text.value.trim()) {
      out.textContent = "Write a message first.";
      out.hidden = false;
      text.setAttribute("aria-invalid", "true");
      text.focus();
      return;
    }
    button.disabled = true;
    try {
      const resp = await api(job.dataset.messages, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ message: text.value }),
      });
      if (!resp.ok) {
        out.textContent = (await apiError(resp)).message;
        out.hidden = false;
        text.setAttribute("aria-invalid", "true");
        return;
      }
      text.value = "";
      await refreshHeader().catch(report);
      follow();
    } finally {
      button.disabled = false;
    }
  });

  refreshNetwork().catch(report);
  if (!final()) follow();
}
