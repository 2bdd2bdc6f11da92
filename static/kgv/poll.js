// How every page follows work done elsewhere (loaded by templates/base.html before each page's own script): ask the
// server again and again, and put what it answers in place. What the server renders as HTML is swapped in as it
// rendered it (one renderer: the template the page itself includes); JSON is for figures a script sets.
//
//   KGVPoll(url, handle, options) -> {stop(), now()}
//     url      the URL to ask, or a function returning it (asked before each request; "" or null: nothing to follow
//              any more, the polling stops)
//     handle   called with each answer: the parsed JSON, or with `html: true` a DocumentFragment of the server's HTML;
//              returns true once there is nothing more to follow
//     options  a number (ms between requests), or {every: ms (2000), html: false, now: false (ask at once instead
//              of after the first interval), whenShown: false (ask again as soon as the tab is shown again),
//              failed: called with the error when a request fails}
//   A failed request (the server restarting, the network down) backs off up to 30 s and tries again.
//
//   KGVPoll.get(url, {html}) -> Promise of one answer, as `handle` receives it; rejected on a failed request
//   KGVPoll.fragment(html) -> a DocumentFragment of the HTML (table rows parse as rows)
//   KGVPoll.swap(fragment, carry) -> each element of the fragment that has an id replaces the page's element of
//     that id (one the page lacks is left out); `carry(current, fresh)`, when given, runs first, to keep what the
//     user has done to the current element (a ticked box). Returns the elements swapped in.
(function () {
  "use strict";
  const MAX_WAIT_MS = 30000;

  function fragment(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html.trim();
    return holder.content;
  }

  async function get(url, options) {
    const html = Boolean(options && options.html);
    const response = await fetch(url, {
      headers: { Accept: html ? "text/html" : "application/json" },
      credentials: "same-origin",
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return html ? fragment(await response.text()) : response.json();
  }

  function swap(fresh, carry) {
    const swapped = [];
    Array.from(fresh.children).forEach((element) => {
      const current = element.id && document.getElementById(element.id);
      if (!current) return;
      const incoming = document.importNode(element, true);
      if (carry) carry(current, incoming);
      current.replaceWith(incoming);
      swapped.push(incoming);
    });
    return swapped;
  }

  function poll(url, handle, options) {
    const settings = typeof options === "number" ? { every: options } : options || {};
    const every = settings.every || 2000;
    let wait = every;
    let timer = null;
    let stopped = false;
    let busy = false;

    function schedule(ms) {
      window.clearTimeout(timer);
      if (!stopped) timer = window.setTimeout(ask, ms);
    }

    async function ask() {
      if (stopped || busy) return;
      const target = typeof url === "function" ? url() : url;
      if (!target) {
        stopped = true;
        return;
      }
      busy = true;
      try {
        if (handle(await get(target, settings))) stopped = true;
        wait = every;
      } catch (error) {
        wait = Math.min(wait * 2, MAX_WAIT_MS);
        if (settings.failed) settings.failed(error);
      } finally {
        busy = false;
      }
      schedule(wait);
    }

    if (settings.whenShown) {
      document.addEventListener("visibilitychange", () => { if (!document.hidden) schedule(0); });
    }
    schedule(settings.now ? 0 : every);
    return {
      stop() {
        stopped = true;
        window.clearTimeout(timer);
      },
      now() { schedule(0); },
    };
  }

  poll.get = get;
  poll.fragment = fragment;
  poll.swap = swap;
  window.KGVPoll = poll;
})();
