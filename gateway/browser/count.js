// How many elements each selector matches; -1 for a selector that is not
// valid CSS. Used by the browser backend's start-up check.
(sels) => {
  const out = {};
  for (const [key, sel] of Object.entries(sels)) {
    try { out[key] = document.querySelectorAll(sel).length; } catch (e) { out[key] = -1; }
  }
  return out;
}
