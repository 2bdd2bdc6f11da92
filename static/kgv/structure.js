// The structural-model strip of the queue and run pages (templates/verifier/structure_status.html):
// while a model of the page's KG is queued or training, poll the status JSON (static/kgv/poll.js) and redraw the strip, so
// "training (45%), about 6 min left" becomes "ready (ranks unseen facts well: 0.38)" without a reload.
(function () {
  "use strict";

  const strip = document.getElementById("structure-status");
  if (!strip) return;
  const pollMs = Number(strip.dataset.pollMs || 5000);
  const IN_FLIGHT = ["queued", "training"];

  function inFlight() {
    return Array.from(strip.querySelectorAll(".structure-model")).some((line) => IN_FLIGHT.includes(line.dataset.state));
  }

  function update(model) {
    const line = strip.querySelector(`.structure-model[data-kg-id="${model.kg_id}"]`);
    if (!line) return;
    line.dataset.state = model.state;
    line.className = `structure-model state-${model.state}`;
    line.querySelector(".structure-text").textContent = model.text;
    line.querySelector(".structure-text").title = model.detail;
    const bar = line.querySelector(".structure-progress");
    bar.value = model.percent;
    bar.textContent = `${model.percent}%`;
    bar.hidden = !model.in_flight;
  }

  if (inFlight()) {
    window.KGVPoll(strip.dataset.url, (state) => {
      state.models.forEach(update);
      return !inFlight();
    }, pollMs);
  }
})();
