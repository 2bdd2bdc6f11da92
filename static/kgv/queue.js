// The queue page: tick all rows, count the ticked ones, apply a filter as soon as a choice changes, and
// keep the rows whose run is queued or running up to date (polling the queue-status JSON).
(function () {
  "use strict";

  const POLL_MS = 4000;
  const table = document.getElementById("queue-table");
  const selectAll = document.getElementById("select-all");
  const counter = document.getElementById("selected-count");
  const filters = document.getElementById("filters");
  const estimate = document.getElementById("run-estimate");

  // "about 4 min and $0.02" for n runs one after another, from the pace of recent runs (the page's data)
  function estimateText(n) {
    const seconds = Number(estimate.dataset.medianSeconds) * n;
    const cost = Number(estimate.dataset.meanCost) * n;
    const duration = seconds >= 90 ? `${Math.round(seconds / 60)} min` : `${Math.round(seconds)} s`;
    return `running them: about ${duration} and $${cost.toFixed(2)} (one worker)`;
  }

  function rowChecks() {
    return Array.from(document.querySelectorAll("input.row-check"));
  }

  function refreshSelection() {
    const checks = rowChecks();
    const ticked = checks.filter((box) => box.checked).length;
    if (counter) counter.textContent = ticked ? `${ticked} selected` : "None selected";
    if (estimate && estimate.dataset.medianSeconds) estimate.textContent = ticked ? estimateText(ticked) : "";
    if (selectAll) {
      selectAll.checked = ticked > 0 && ticked === checks.length;
      selectAll.indeterminate = ticked > 0 && ticked < checks.length;
    }
    document.querySelectorAll("button.needs-selection").forEach((button) => { button.disabled = ticked === 0; });
    checks.forEach((box) => box.closest("tr").classList.toggle("ticked", box.checked));
  }

  if (selectAll) {
    selectAll.addEventListener("change", () => {
      rowChecks().forEach((box) => { box.checked = selectAll.checked; });
      refreshSelection();
    });
  }
  if (table) {
    table.addEventListener("change", (event) => {
      if (event.target.classList.contains("row-check")) refreshSelection();
    });
  }
  refreshSelection();

  // Accepting verdicts records a review per task: ask once, naming how many, before the form goes.
  const acceptButton = document.getElementById("bulk-accept");
  if (acceptButton) {
    acceptButton.addEventListener("click", (event) => {
      const ticked = rowChecks().filter((box) => box.checked).length;
      if (!window.confirm(`Accept the verdicts of ${ticked} ticked task(s)? Each becomes your review.`)) event.preventDefault();
    });
  }

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
      disputed.textContent = "disputed";
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
