// The panel's service worker: it keeps a copy of the page (HTML, script,
// styles, vendored libraries) so that a reload while fano is stopped
// still shows the panel, greyed, saying since when fano is unreachable,
// instead of the browser's error page. The network always comes first:
// a running fano serves its current page. The API is never cached.
"use strict";

const CACHE = "fano-panel-v1";
const SHELL = ["/", "/app.js", "/style.css", "/markdown.js", "/vendor/markdown-it.min.js", "/vendor/katex.min.js",
  "/vendor/katex.min.css", "/vendor/uplot.min.js", "/vendor/uplot.min.css"];

self.addEventListener("install", (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (e) => {
  e.waitUntil(caches.keys().then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

function shell(url) {
  return url.origin === self.location.origin && (SHELL.includes(url.pathname) || url.pathname.startsWith("/vendor/fonts/"));
}

self.addEventListener("fetch", (e) => {
  const url = new URL(e.request.url);
  if (e.request.method !== "GET" || !shell(url)) return;
  e.respondWith(fetch(e.request).then((resp) => {
    if (resp.ok) {
      const copy = resp.clone();
      caches.open(CACHE).then((c) => c.put(url.pathname, copy));
    }
    return resp;
  }).catch(() => caches.match(url.pathname).then((hit) => hit || Response.error())));
});
