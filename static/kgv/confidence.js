// The confidence page follows the verification of a KG's calibration triples: how many are verified and whether the
// worker has taken the evaluation up, from the API's own-weighing state; once it has finished or stopped, the page is
// loaded again for the form that comes next (fit a model on them, or resume).
(function () {
  "use strict";
  const UNFINISHED = ["created", "running"];

  document.querySelectorAll(".own-progress[data-state-url]").forEach((line) => {
    if (!UNFINISHED.includes(line.dataset.status)) return;
    window.KGVPoll(line.dataset.stateUrl, (state) => {
      if (!UNFINISHED.includes(state.evaluation_status)) {
        window.location.reload();
        return true;
      }
      line.querySelector(".own-status").textContent = state.evaluation_status;
      line.querySelector(".own-verified").textContent = state.verified || "none";
      line.querySelector(".own-waiting").hidden = !state.waiting_for_worker;
      return false;
    });
  });
})();
