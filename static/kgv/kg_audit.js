// A KG audit's page while the audit workers score it (templates/verifier/kg_audit/detail.html): polls the audit's
// state and redraws its stage, the triples scored and the progress bar; once the audit has finished or failed, the
// page is loaded again to show what it found.
(function () {
  "use strict";
  const live = document.getElementById("kg-audit-live");
  if (!live) return;
  const field = (id) => document.getElementById(id);

  window.KGVPoll(live.dataset.stateUrl, (state) => {
    field("kg-audit-stage").textContent = state.stage || "waiting for an audit worker";
    field("kg-audit-scored").textContent = state.scored.toLocaleString("en");
    field("kg-audit-triples").textContent = state.triples.toLocaleString("en");
    field("kg-audit-percent").textContent = String(state.percent);
    const bar = field("kg-audit-progress");
    bar.value = state.percent;
    bar.textContent = `${state.percent}%`;
    field("kg-audit-status").textContent = state.status_label;
    field("kg-audit-stale").hidden = !state.stale;
    if (!state.done) return false;
    window.location.reload();
    return true;
  }, Number(live.dataset.pollMs || 1500));
})();
