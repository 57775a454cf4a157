// One reading of a chat page for the browser backend: how many answers,
// the last one's text, and which signals are visible. Each field of s is a
// list of CSS selectors tried in order; an invalid one matches nothing
// here (count.js reports invalid ones at start-up).
(s) => {
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
  // The matches of the first selector that matches anything.
  const first = (list) => {
    for (const sel of list || []) {
      const els = q(sel);
      if (els.length) return els;
    }
    return [];
  };
  // Every visible match of any selector, outermost only.
  const shown = (list) => {
    const out = [];
    for (const sel of list || []) {
      for (const el of q(sel)) if (visible(el) && !out.includes(el)) out.push(el);
    }
    return out.filter((el) => !out.some((o) => o !== el && o.contains(el)));
  };
  const text = (el) => (el ? (el.innerText || el.textContent || '') : '');
  const answers = first(s.answer);
  return {
    answers: answers.length,
    text: text(answers[answers.length - 1]),
    generating: shown(s.generating).length > 0,
    prompt: shown(s.prompt).length > 0,
    login: shown(s.login).length > 0,
    // An account menu may sit in a collapsed sidebar: being there counts.
    logged_in: first(s.logged_in).length > 0,
    banner: shown(s.banner).map(text).join('\n'),
    url: location.href,
  };
}
