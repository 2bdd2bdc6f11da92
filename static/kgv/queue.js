// The queue page (ticking rows and confirming bulk actions is selection.js): the time and cost of running the
// ticked tasks, a filter applied as soon as a choice changes, and the rows whose run is queued or running kept up
// to date (static/kgv/poll.js: the server's rows swapped in).
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

  // The rows whose run is queued or running (data-live) are asked for again as the server renders them
  // (templates/verifier/queue_row.html, the page's own rows) and swapped in, ticks kept; a row whose run has ended
  // comes back without data-live and is followed no more.
  function liveRowsUrl() {
    const live = table ? Array.from(table.querySelectorAll("tr[data-live]")) : [];
    if (!live.length) return "";
    return `${table.dataset.rowsUrl}&tasks=${live.map((row) => row.dataset.taskId).join(",")}`;
  }

  function keepTick(current, fresh) {
    const ticked = current.querySelector("input.row-check");
    const box = fresh.querySelector("input.row-check");
    if (ticked && box) box.checked = ticked.checked;
    fresh.classList.toggle("ticked", Boolean(ticked && ticked.checked));
  }

  if (table && window.KGVPoll) {
    window.KGVPoll(liveRowsUrl, (rows) => {
      window.KGVPoll.swap(rows, keepTick);
      return false;
    }, { every: POLL_MS, html: true });
  }
})();
