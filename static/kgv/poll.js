// Polling a JSON state URL for a page that follows work done elsewhere (a claim's parts, a KG's calibration triples):
// KGVPoll(url, handle) fetches the URL every `delay` ms and hands the parsed state to `handle`, which returns true
// once there is nothing more to follow. A failed request (the server restarting, the network down) backs off up to
// 30 s and tries again.
window.KGVPoll = function (url, handle, delay) {
  "use strict";
  const every = delay || 2000;
  let wait = every;
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (response.ok) {
        if (handle(await response.json())) return;
        wait = every;
      } else {
        wait = Math.min(wait * 2, 30000);
      }
    } catch (error) {
      wait = Math.min(wait * 2, 30000);
    }
    window.setTimeout(poll, wait);
  }
  window.setTimeout(poll, wait);
};
