// The claim page follows its claim until it is settled: the pseudo-subgraph appears once a worker has written it,
// each part's run status and verdict as they land, then the claim's verdict. Polls the page's state URL.
(function () {
  "use strict";
  const live = document.getElementById("claim-live");
  if (!live || live.dataset.settled === "true") return;
  const url = live.dataset.stateUrl;
  let delay = 1500;
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        const state = await response.json();
        live.innerHTML = state.html;
        if (state.settled) {
          live.dataset.settled = "true";
          if (state.status === "failed") window.location.reload(); // shows the retry button
          return;
        }
        delay = 1500;
      } else {
        delay = Math.min(delay * 2, 30000);
      }
    } catch (error) {
      delay = Math.min(delay * 2, 30000);
    }
    window.setTimeout(poll, delay);
  }
  window.setTimeout(poll, delay);
})();
