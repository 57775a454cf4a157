// Resolves at the page's next change (any DOM mutation) or after ms,
// whichever comes first: the answer loop reads the page again as soon as
// something happened instead of sleeping a whole poll interval.
(ms) => new Promise((resolve) => {
  let timer = null;
  const obs = new MutationObserver(() => { obs.disconnect(); clearTimeout(timer); resolve(true); });
  obs.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
  timer = setTimeout(() => { obs.disconnect(); resolve(false); }, ms);
})
