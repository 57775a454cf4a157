// One reading of a chat page for the browser backend: how many answers,
// the last one's text, and which signals are visible. Each field of s is a
// list of CSS selectors tried in order; an invalid one matches nothing
// here (count.js reports invalid ones at start-up). s.how / s.attr say how
// the answer is read (innerText, textContent, attribute).
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
  const read = (el) => {
    if (!el) return '';
    if (s.how === 'textContent') return el.textContent || '';
    if (s.how === 'attribute') return el.getAttribute(s.attr) || '';
    return text(el);
  };
  const answers = first(s.answer);
  const last = answers[answers.length - 1];
  // Of the last answer: el is the answer, inside it, around it (a turn
  // carrying its streaming flag) or after it in document order (the
  // toolbar under it); earlier answers' marks come before it. With no
  // answer yet, everything on the page is of the turn to come.
  const ofLast = (el) => !last || el.contains(last) || last.contains(el) ||
    (last.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0;
  // Done: a visible completion signal of the last answer.
  const done = !!last && shown(s.complete).some(ofLast);
  return {
    answers: answers.length,
    text: read(last),
    generating: shown(s.generating).length > 0,
    prompt: shown(s.prompt).length > 0,
    login: shown(s.login).length > 0,
    // An account menu may sit in a collapsed sidebar: being there counts.
    logged_in: first(s.logged_in).length > 0,
    banner: shown(s.banner).map(text).join('\n'),
    url: location.href,
    done: done,
    gone: shown(s.gone).length > 0,
    title: document.title,
    // A bot-check page's markers count visible or not (its scripts).
    challenge: first(s.challenge).length > 0,
    // The texts of error-turn containers of the last answer; the profile's
    // patterns decide which are error turns.
    error_turn: shown(s.error_in).filter(ofLast).map(text).join('\n'),
  };
}
