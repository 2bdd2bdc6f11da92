// The queue page (ticking rows and confirming bulk actions is selection.js): the time and cost of running the
// ticked tasks, a filter applied as soon as a choice changes, and the rows whose run is queued or running kept up
// to date (polling the queue-status JSON).
(function () {
  "use strict";

  const POLL_MS = 4000;
  const table = document.getElementById("queue-table");
  const filters = document.getElementById("filters");
  const estimate = document.getElementById("run-estimate");
  const kind = document.getElementById("bulk-kind");

  // "about 4 min and $0.02" for n runs of the chosen kind one after another, from the pace of recent runs of that
  // kind (the page's data: data-agent-seconds, data-evidence-cost, …); nothing without a basis
  function estimateText(n) {
    const chosen = kind ? kind.value : "agent";
    const perRun = estimate.dataset[`${chosen}Seconds`];
    if (!n || perRun === undefined) return "";
    const seconds = Number(perRun) * n;
    const cost = Number(estimate.dataset[`${chosen}Cost`]) * n;
    const duration = seconds >= 90 ? `${Math.round(seconds / 60)} min` : `${Math.round(seconds)} s`;
    return `running them: about ${duration} and $${cost.toFixed(2)} (one worker)`;
  }

  // how many the action would take (selection.js: the ticked rows, or every row of the view)
  let selected = document.querySelectorAll("input.row-check:checked").length;

  function showEstimate() {
    if (estimate) estimate.textContent = estimateText(selected);
  }
  document.addEventListener("kgv:selection", (event) => {
    selected = event.detail.ticked;
    showEstimate();
  });
  if (kind) kind.addEventListener("change", showEstimate);
  showEstimate();

  if (filters) {
    filters.querySelectorAll("select").forEach((select) => {
      select.addEventListener("change", () => filters.requestSubmit());
    });
  }

  function setBadge(cell, className, text, href) {
    cell.textContent = "";
    const badge = document.createElement(href ? "a" : "span");
    badge.className = className;
    badge.textContent = text;
    if (href) badge.href = href;
    cell.appendChild(badge);
  }

  function update(row, task) {
    setBadge(row.querySelector('[data-field="status"]'), `badge status-${task.status}`, task.status_label, "");
    const verdictCell = row.querySelector('[data-field="verdict"]');
    // The run link carries the queue's filters like the row's task link (its ?queue=…), for decide-and-advance.
    const view = new URL(row.querySelector("td.triple a").href).search;
    if (task.verdict) setBadge(verdictCell, `badge verdict-${task.verdict}`, task.verdict_label, task.run_href + view);
    if (task.verdict && task.disputed) {
      const disputed = document.createElement("span");
      disputed.className = "badge disputed";
      disputed.dataset.field = "disputed";
      disputed.title = task.disputed_reason || "The verdict and the structural evidence disagree";
      disputed.textContent = "structure disagrees";
      verdictCell.append(" ", disputed);
    }
    const confidenceCell = row.querySelector('[data-field="confidence"]');
    if (task.confidence !== null) {
      confidenceCell.textContent = "";
      const wrap = document.createElement("span");
      wrap.className = "confidence";
      const meter = document.createElement("span");
      meter.className = "meter";
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = `${Math.round(task.confidence * 100)}%`;
      meter.appendChild(bar);
      wrap.append(meter, task.confidence.toFixed(2));
      confidenceCell.appendChild(wrap);
    }
    if (!task.live) delete row.dataset.live;
  }

  async function poll() {
    const live = table ? Array.from(table.querySelectorAll("tr[data-live]")) : [];
    if (!live.length) return;
    const ids = live.map((row) => row.dataset.taskId).join(",");
    try {
      const response = await fetch(`${table.dataset.statusUrl}?tasks=${ids}`, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const { tasks } = await response.json();
        tasks.forEach((task) => {
          const row = table.querySelector(`tr[data-task-id="${task.id}"]`);
          if (row) update(row, task);
        });
      }
    } catch (error) {
      // The server is restarting or the network dropped; the next poll tries again.
    }
    window.setTimeout(poll, POLL_MS);
  }
  window.setTimeout(poll, POLL_MS);
})();
