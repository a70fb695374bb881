// The job list: its rows are fetched again every few seconds (the server
// renders them with the page's own template) and replaced when they
// changed, keeping focus on the link it was on.
import { api, whileVisible } from "./app.js";

const box = document.getElementById("jobs");
if (box) {
  let last = null;
  whileVisible(async () => {
    const resp = await api(box.dataset.refresh);
    if (!resp.ok) return;
    const html = await resp.text();
    if (html === last) return;
    const focused = document.activeElement && box.contains(document.activeElement)
      ? document.activeElement.getAttribute("href") : null;
    box.innerHTML = html;
    last = html;
    if (focused) {
      const again = box.querySelector(`a[href="${CSS.escape(focused)}"]`);
      if (again) again.focus();
    }
  }, 2000);
}
