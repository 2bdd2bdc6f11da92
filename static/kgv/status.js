// The top bar's service line (templates/base.html): whether the model the runs call answers (or is busy with
// runs), how many runs are queued and running and why the queued ones wait, from /health/status/, refreshed
// every 30 s and whenever the tab comes back (static/kgv/poll.js).
(function () {
  "use strict";

  const line = document.getElementById("service-status");
  if (!line) return;
  const pollMs = Number(line.dataset.pollMs || 30000);

  function show(state, model, depth, title) {
    line.dataset.state = state;
    line.querySelector(".model").textContent = model;
    line.querySelector(".depth").textContent = depth;
    line.title = title;
  }

  function showStatus(status) {
    const depth = `${status.queued} queued · ${status.running} running` + (status.waiting ? ` (${status.waiting})` : "");
    if (status.model.state === "busy") {
      show("busy", `model ${status.model.name} busy`, depth,
           `The model ${status.model.name} is computing runs and answers nothing else until it is done; ${depth}.`);
    } else if (status.model.ok) {
      show("up", `model ${status.model.name}`, depth, `The model ${status.model.name} answers; ${depth}.`);
    } else {
      show("down", `model ${status.model.name} not answering`, depth,
           `The model endpoint does not answer: runs will wait or fail. ${depth}. An administrator's Health page says why.`);
    }
    return false;  // followed as long as the page is open
  }

  window.KGVPoll(line.dataset.url, showStatus, {
    every: pollMs,
    now: true,
    whenShown: true,
    failed: () => show("unknown", "status unavailable", "", "The workbench status could not be read; it is tried again shortly."),
  });
})();
