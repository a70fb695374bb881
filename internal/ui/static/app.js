// Shared by every page: the session's CSRF token on the UI's own requests
// to the API, an SSE reader over fetch (EventSource cannot send the
// token), and live relative times.

/** The session's CSRF token, from the page. */
export function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

/** fetch with the session's CSRF token; same origin only. */
export function api(path, init = {}) {
  const headers = new Headers(init.headers || {});
  headers.set("X-CSRF-Token", csrf());
  return fetch(path, { ...init, headers, credentials: "same-origin", mode: "same-origin", redirect: "error" });
}

/** The API's error body's message (and fields), or the status. */
export async function apiError(resp) {
  try {
    const body = await resp.json();
    if (body && body.error) return body.error;
  } catch (_) { /* not JSON */ }
  return { code: String(resp.status), message: `${resp.status} ${resp.statusText}` };
}

/**
 * Follow an SSE stream: onEvent({id, event, data}) for each event, until
 * the stream ends or signal aborts. Returns the last event id seen.
 */
export async function followSSE(path, onEvent, signal) {
  const resp = await api(path, { headers: { Accept: "text/event-stream" }, signal });
  if (!resp.ok) throw await apiError(resp);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", last = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const ev = { id: "", event: "message", data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const k = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (k === "id") ev.id = v;
        else if (k === "event") ev.event = v;
        else if (k === "data") ev.data += (ev.data ? "\n" : "") + v;
      }
      if (ev.id) last = ev.id;
      if (ev.data || ev.id) onEvent(ev);
    }
  }
}

/** Run fn every ms while the page is visible (and once when it shows again). */
export function whileVisible(fn, ms) {
  let timer = 0;
  const tick = async () => {
    timer = 0;
    if (document.visibilityState === "visible") {
      try { await fn(); } catch (e) { console.warn("refresh:", e.message || e); }
    }
    if (!timer) timer = setTimeout(tick, ms);
  };
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && timer) { clearTimeout(timer); tick(); }
  });
  timer = setTimeout(tick, ms);
}
