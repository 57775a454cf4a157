// Finds and reads the element of a control step (controls.go): the first
// visible match of a.target's selectors (in order) whose text contains
// a.target.text; it is marked data-fano-target=a.mark so that Playwright
// clicks exactly it. Returns whether it was found, its own on/off state
// (null when it shows none), whether a.on and a.shown are visible, and
// whether a.guard (the first step) is visible.
(a) => {
  const visible = (el) => {
    if (!el || !el.isConnected) return false;
    const st = getComputedStyle(el);
    if (st.display === 'none' || st.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const q = (sel) => {
    try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; }
  };
  const find = (t) => {
    if (!t || !t.css || !t.css.length) return null;
    const want = (t.text || '').toLowerCase();
    for (const sel of t.css) {
      for (const el of q(sel)) {
        if (!visible(el)) continue;
        if (want && !(el.innerText || el.textContent || '').toLowerCase().includes(want)) continue;
        return el;
      }
    }
    return null;
  };
  const own = (el) => {
    for (const attr of ['aria-checked', 'aria-pressed', 'aria-selected']) {
      const v = el.getAttribute(attr);
      if (v !== null) return v === 'true';
    }
    if (el instanceof HTMLInputElement && (el.type === 'checkbox' || el.type === 'radio')) return el.checked;
    const inner = el.querySelector('input[type=checkbox], input[type=radio], [role=switch][aria-checked]');
    if (inner) return inner instanceof HTMLInputElement ? inner.checked : inner.getAttribute('aria-checked') === 'true';
    if (el.classList.contains('selected') || el.querySelector('.selected')) return true;
    return null;
  };
  const out = { found: false, state: null, on: false, shown: false, guard: false };
  const el = find(a.target);
  if (el) {
    for (const old of document.querySelectorAll('[data-fano-target]')) old.removeAttribute('data-fano-target');
    el.setAttribute('data-fano-target', a.mark);
    out.found = true;
    out.state = own(el);
  }
  out.on = (a.on || []).some((sel) => q(sel).some(visible));
  out.shown = find(a.shown) !== null;
  out.guard = a.guard ? find(a.guard) !== null : true;
  return out;
}
