// The claim page follows its claim until it is settled: the pseudo-subgraph appears once a worker has written it,
// each part's run status and verdict as they land, then the claim's verdict. Polls the page's state URL, and draws
// the pseudo-subgraph (static/kgv/dist/graph.js) whenever it changes.
(function () {
  "use strict";
  const live = document.getElementById("claim-live");
  const card = document.getElementById("claim-graph-card");
  let drawn = null;
  let shown = "";

  function draw(graph) {
    const text = JSON.stringify(graph);
    if (!card || !window.KGVGraph || !graph.nodes.length || text === shown) return;
    shown = text;
    card.hidden = false;
    if (drawn) drawn.cy.destroy();
    drawn = window.KGVGraph.draw(document.getElementById("claim-graph"), graph);
  }

  const initial = document.getElementById("claim-graph-data");
  if (initial) draw(JSON.parse(initial.textContent));
  if (!live || live.dataset.settled === "true") return;
  window.KGVPoll(live.dataset.stateUrl, (state) => {
    live.innerHTML = state.html;
    draw(state.graph);
    if (!state.settled) return false;
    live.dataset.settled = "true";
    // the retry or review form, which the page lacked while the claim was pending
    if (state.status === "failed" || !document.getElementById("claim-review")) window.location.reload();
    return true;
  }, 1500);
})();
