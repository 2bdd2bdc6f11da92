// The confidence page follows the verification of a KG's calibration triples: how many are verified and whether the
// worker has taken the evaluation up, from the API's own-weighing state; once it has finished or stopped, the page is
// loaded again for the form that comes next (fit a model on them, or resume).
(function () {
  "use strict";
  const UNFINISHED = ["created", "running"];

  document.querySelectorAll(".own-progress[data-state-url]").forEach((line) => {
    if (!UNFINISHED.includes(line.dataset.status)) return;
    let delay = 2000;
    async function poll() {
      try {
        const response = await fetch(line.dataset.stateUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok) {
          const state = await response.json();
          if (!UNFINISHED.includes(state.evaluation_status)) {
            window.location.reload();
            return;
          }
          line.querySelector(".own-status").textContent = state.evaluation_status;
          line.querySelector(".own-verified").textContent = state.verified || "none";
          line.querySelector(".own-waiting").hidden = !state.waiting_for_worker;
          delay = 2000;
        } else {
          delay = Math.min(delay * 2, 30000);
        }
      } catch (error) {
        delay = Math.min(delay * 2, 30000);
      }
      window.setTimeout(poll, delay);
    }
    window.setTimeout(poll, delay);
  });
})();
