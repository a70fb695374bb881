// The new-job form: it posts the job to the API as JSON, or as
// multipart/form-data with the workspace (a chosen .zip/.tar.gz, or a
// chosen folder packed here as a tar.gz), and goes to the job's page.
// The API's errors are shown at the fields they name (data-field on the
// inputs), anything else in the alert box above the form.
import { api, apiError } from "./app.js";
import { tarGz } from "./tar.js";

const form = document.getElementById("new-job");
if (form) setUp(form);

function setUp(form) {
  const $ = (id) => document.getElementById(id);
  const showSource = () => {
    const source = form.elements.source.value;
    $("source-repo").hidden = source !== "repo";
    $("source-upload").hidden = source !== "upload";
  };
  for (const r of form.elements.source) r.addEventListener("change", showSource);
  showSource();
  const showPR = () => { $("repo-pr-fields").hidden = !$("repo-pr").checked; };
  $("repo-pr").addEventListener("change", showPR);
  showPR();
  // One upload at a time: choosing a folder forgets the archive, and back.
  const archive = $("upload-archive"), folder = $("upload-folder");
  archive.addEventListener("change", () => { if (archive.files.length) folder.value = ""; });
  folder.addEventListener("change", () => {
    if (folder.files.length) archive.value = "";
    const n = folder.files.length;
    progress(null, n ? `${n} file${n === 1 ? "" : "s"}, ${size([...folder.files].reduce((s, f) => s + f.size, 0))}` : "");
  });
  $("task").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    send(form).catch((err) => problems(err.fields || [], err.message || String(err)));
  });
  form.dataset.ready = "true"; // for tests: the handlers are on
}

/** Submit the form; errors end up at their fields. */
async function send(form) {
  const button = document.getElementById("submit");
  if (button.disabled) return;
  problems([], "");
  const { job, bad } = readForm(form);
  if (bad.length) return problems(bad, "");
  button.disabled = true;
  form.setAttribute("aria-busy", "true");
  let sent = false;
  try {
    const resp = await post(form, job);
    if (resp.ok) {
      const body = await resp.json();
      sent = true; // the button stays disabled while the job's page loads
      progress(null, "Submitted; opening the job…");
      location.assign("/jobs/" + encodeURIComponent(body.job_id));
      return;
    }
    const err = await apiError(resp);
    problems(err.fields || [], err.message);
  } finally {
    if (!sent) {
      button.disabled = false;
      form.removeAttribute("aria-busy");
      progress(null, "");
    }
  }
}

/** POST the job, with its upload if the form has one. */
async function post(form, job) {
  const init = { method: "POST" };
  const upload = form.elements.source.value === "upload" ? await workspace(form) : null;
  if (upload) {
    const body = new FormData();
    body.append("job", new Blob([JSON.stringify(job)], { type: "application/json" }), "job.json");
    body.append("workspace", upload.blob, upload.name);
    init.body = body;
    progress(-1, `Uploading ${size(upload.blob.size)}…`);
  } else {
    init.headers = { "Content-Type": "application/json" };
    init.body = JSON.stringify(job);
    progress(-1, "Submitting…");
  }
  return api("/v1/jobs", init);
}

/** The upload's archive: the chosen file, or the chosen folder packed. */
async function workspace(form) {
  const archive = form.elements["upload-archive"].files[0];
  if (archive) return { blob: archive, name: archive.name };
  const files = [...form.elements["upload-folder"].files];
  if (!files.length) throw fieldProblem("workspace", "Choose a .zip or .tar.gz file, or a folder, to upload.");
  // Paths are relative to the chosen folder: its own name is dropped.
  const entries = files.map((file) => ({ path: file.webkitRelativePath.split("/").slice(1).join("/") || file.name, file }));
  progress(0, `Packing ${entries.length} files…`);
  const blob = await tarGz(entries, (done, total) => progress(done / total, `Packing ${done} of ${total} files…`));
  return { blob, name: "workspace.tar.gz" };
}

/** An error that problems() shows at field. */
function fieldProblem(field, message) {
  const e = new Error(message);
  e.fields = [{ field, message }];
  return e;
}

/** The form as a submission, and what is wrong with it before sending. */
function readForm(form) {
  const v = (name) => form.elements[name].value.trim();
  const job = { task: form.elements.task.value };
  const bad = [];
  if (!job.task.trim()) bad.push({ field: "task", message: "Write a task for the agent." });
  if (v("model")) job.model = v("model");
  if (v("image")) job.image = v("image");
  const limits = {};
  const number = (name, key, re, what) => {
    if (!v(name)) return;
    if (!re.test(v(name))) bad.push({ field: "limits." + key, message: what });
    else limits[key] = Number(v(name));
  };
  number("max_steps", "max_steps", /^\d+$/, "Max steps is a whole number, such as 100.");
  number("cpus", "cpus", /^\d*\.?\d+$/, "CPUs is a number, such as 2 or 0.5.");
  if (v("timeout")) {
    if (/^\d+(\.\d+)?$/.test(v("timeout"))) limits.timeout = Number(v("timeout")); // seconds
    else if (/^(\d*\.?\d+(ns|us|µs|ms|s|m|h))+$/.test(v("timeout"))) limits.timeout = v("timeout");
    else bad.push({ field: "limits.timeout", message: "Timeout is a duration such as 30m or 1h30m, or seconds." });
  }
  for (const key of ["memory", "disk"]) {
    if (!v(key)) continue;
    if (/^\d+(\.\d+)? ?[kmgtp]?i?b?$/i.test(v(key))) limits[key] = v(key);
    else bad.push({ field: "limits." + key, message: `${key[0].toUpperCase() + key.slice(1)} is a size such as 512m or 2g.` });
  }
  if (Object.keys(limits).length) job.limits = limits;
  if (form.elements.source.value === "repo") job.repo = readRepo(form, v);
  return { job, bad };
}

function readRepo(form, v) {
  const repo = { url: v("repo-url") };
  if (v("repo-ref")) repo.ref = v("repo-ref");
  if (v("repo-branch")) repo.branch = v("repo-branch");
  if (form.elements["repo-push"].checked) repo.push = true;
  if (form.elements["repo-pr"].checked) repo.pull_request = v("repo-pr-title") ? { title: v("repo-pr-title") } : {};
  return repo;
}

/**
 * Show problems: each of fields ({field, message}) at its input, the
 * rest and message (unless every field found its input) in the alert.
 * Called with nothing, it clears them.
 */
function problems(fields, message) {
  for (const el of document.querySelectorAll("#new-job [aria-invalid]")) clearField(el);
  const rest = [];
  for (const p of fields) {
    const el = inputFor(p.field);
    if (el) markField(el, p.message);
    else rest.push(p.message);
  }
  const first = document.querySelector('#new-job [aria-invalid="true"]'); // in the page's order
  if (message && (!fields.length || rest.length)) rest.unshift(message);
  const box = document.getElementById("form-problem");
  box.replaceChildren(...[...new Set(rest)].map((m) => Object.assign(document.createElement("p"), { textContent: m })));
  box.hidden = rest.length === 0;
  if (first) first.focus();
  else if (rest.length) box.scrollIntoView({ block: "nearest" });
}

/** The input a field path names: its data-field, or its parent's. */
function inputFor(field) {
  for (let f = field; f; f = f.includes(".") ? f.slice(0, f.lastIndexOf(".")) : "") {
    const all = [...document.querySelectorAll(`#new-job [data-field~="${CSS.escape(f)}"]`)];
    const shown = all.filter((el) => !el.closest("[hidden]"));
    const el = shown.find((x) => x.files && x.files.length) || shown[0];
    if (el) return el;
  }
  return null;
}

function markField(el, message) {
  const msg = document.getElementById(el.id + "-error");
  el.setAttribute("aria-invalid", "true");
  if (!msg) return;
  if (msg.textContent) msg.append(document.createElement("br"), message);
  else msg.textContent = message;
  msg.hidden = false;
  const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
  if (!ids.includes(msg.id)) el.setAttribute("aria-describedby", [msg.id, ...ids].join(" "));
}

function clearField(el) {
  const msg = document.getElementById(el.id + "-error");
  el.removeAttribute("aria-invalid");
  if (!msg) return;
  msg.textContent = "";
  msg.hidden = true;
  const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter((id) => id && id !== msg.id);
  if (ids.length) el.setAttribute("aria-describedby", ids.join(" "));
  else el.removeAttribute("aria-describedby");
}

/** Show progress: fraction 0..1, -1 for under way, null for no bar; and a text. */
function progress(fraction, text) {
  const bar = document.getElementById("progress");
  if (fraction === null) bar.hidden = true;
  else {
    bar.hidden = false;
    if (fraction < 0) bar.removeAttribute("value");
    else bar.value = fraction;
  }
  if (text !== undefined) document.getElementById("progress-text").textContent = text;
}

/** A byte count as people read it. */
function size(n) {
  const units = ["bytes", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
